package jsonl

import "bytes"

// DefaultLineCap is the default maximum length in bytes of one line.
const DefaultLineCap = 1 << 20

// Splitter cuts a byte stream fed in arbitrary chunks into lines, holding at
// most Cap bytes of an unfinished line: memory stays bounded whatever the
// stream. A line longer than Cap is reported once, at its end, with its
// first Cap bytes and truncated=true; the rest of it is discarded unseen.
//
// The line passed to Emit excludes the '\n' and any trailing '\r'. It aliases
// the Splitter's or the caller's buffer and is valid only during the call.
// A Splitter is not safe for concurrent use.
type Splitter struct {
	// Cap is the maximum line length kept; <= 0 means DefaultLineCap.
	Cap int
	// Emit receives every complete line.
	Emit func(line []byte, truncated bool)

	buf      []byte // unfinished line, at most Cap bytes
	overflow bool   // the unfinished line has exceeded Cap
}

func (s *Splitter) limit() int {
	if s.Cap <= 0 {
		return DefaultLineCap
	}
	return s.Cap
}

// Write feeds p to the splitter. It never fails; it implements io.Writer.
func (s *Splitter) Write(p []byte) (int, error) {
	n := len(p)
	limit := s.limit()
	for len(p) > 0 {
		i := bytes.IndexByte(p, '\n')
		if i < 0 {
			s.keep(p, limit)
			break
		}
		if len(s.buf) == 0 && !s.overflow {
			// Fast path: the whole line is inside p, emit without copying.
			if i <= limit {
				s.emit(p[:i], false)
			} else {
				s.emit(p[:limit], true)
			}
		} else {
			s.keep(p[:i], limit)
			s.emit(s.buf, s.overflow)
			s.buf = s.buf[:0]
			s.overflow = false
		}
		p = p[i+1:]
	}
	return n, nil
}

// Flush emits a final line that was not terminated by '\n', if any.
func (s *Splitter) Flush() {
	if len(s.buf) > 0 || s.overflow {
		s.emit(s.buf, s.overflow)
	}
	s.buf = s.buf[:0]
	s.overflow = false
}

// keep appends p to the unfinished line up to the cap.
func (s *Splitter) keep(p []byte, limit int) {
	if s.overflow {
		return
	}
	room := limit - len(s.buf)
	if len(p) > room {
		s.buf = append(s.buf, p[:room]...)
		s.overflow = true
		return
	}
	s.buf = append(s.buf, p...)
}

func (s *Splitter) emit(line []byte, truncated bool) {
	if !truncated && len(line) > 0 && line[len(line)-1] == '\r' {
		line = line[:len(line)-1]
	}
	if s.Emit != nil {
		s.Emit(line, truncated)
	}
}
