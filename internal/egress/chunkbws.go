package egress

import (
	"bytes"
	"net/http"
)

// sizeLines is what a recording connection hands net/http's client of an
// answer: the bytes as received, except that in a chunked body's size
// lines the whitespace before a chunk extension's ";" (RFC 9112 section
// 7.1.1's BWS, valid, which net/http's client refuses as "invalid byte in
// chunk length") is left out. Nothing else changes, and only what the
// client parses: the connection keeps the bytes as received (Exchange.Take),
// which are what a WARC records. It follows the answer's framing as
// ResponseMessage does: heads (interim 1xx answers, then the final one),
// then for a chunked body each size line, its data, the data's line end,
// and the trailer section; everything after that, and any other body,
// passes as it is.
type sizeLines struct {
	method string // the request's, from what was sent (HEAD: no body)
	state  int
	line   []byte // a head or size line not complete yet
	head   []byte // the head read so far
	left   int64  // data bytes of the current chunk still to pass
}

const (
	slHead    = iota // reading a head, line by line
	slSize           // reading a chunk's size line
	slData           // passing a chunk's data
	slDataEnd        // passing the line end after a chunk's data
	slTrailer        // passing the trailer section, line by line
	slPass           // everything else: as it is
)

// feed takes the next bytes received and returns what the client gets of
// them so far; a line not complete yet is held until it is (flush gives
// it back when the stream ends).
func (s *sizeLines) feed(p []byte) []byte {
	var out []byte
	for len(p) > 0 {
		switch s.state {
		case slPass:
			return append(out, p...)
		case slData:
			n := min(int64(len(p)), s.left)
			out = append(out, p[:n]...)
			p, s.left = p[n:], s.left-n
			if s.left == 0 {
				s.state = slDataEnd
			}
			continue
		}
		nl := bytes.IndexByte(p, '\n')
		if nl < 0 {
			s.line = append(s.line, p...)
			if len(s.line) > maxHead {
				// Not a line: the client says what it makes of it.
				out = append(out, s.line...)
				s.line, s.state = nil, slPass
			}
			return out
		}
		line := append(s.line, p[:nl+1]...)
		s.line, p = nil, p[nl+1:]
		out = append(out, s.lineOut(line)...)
	}
	return out
}

// lineOut takes one complete line of a head, a size line, a data's line
// end or a trailer line, and returns what the client gets of it.
func (s *sizeLines) lineOut(line []byte) []byte {
	blank := string(line) == "\r\n" || string(line) == "\n"
	switch s.state {
	case slHead:
		s.head = append(s.head, line...)
		if !blank {
			return line
		}
		status, f, _ := responseFraming(s.head, s.method)
		s.head = nil
		switch {
		case status/100 == 1 && status != http.StatusSwitchingProtocols:
			// An interim answer: the final one's head follows.
		case f == chunked:
			s.state = slSize
		default:
			s.state = slPass
		}
		return line
	case slSize:
		size, ok := chunkSize(line)
		switch {
		case !ok:
			s.state = slPass
			return line
		case size == 0:
			s.state = slTrailer
		default:
			s.state, s.left = slData, size
		}
		return withoutBWS(line)
	case slDataEnd:
		s.state = slSize
		return line
	default: // slTrailer
		if blank {
			s.state = slPass
		}
		return line
	}
}

// withoutBWS is a size line without the spaces and tabs between the size
// and a chunk extension's ";" (or the line's end).
func withoutBWS(line []byte) []byte {
	end := 0
	for end < len(line) && isHex(line[end]) {
		end++
	}
	rest := end
	for rest < len(line) && (line[rest] == ' ' || line[rest] == '\t') {
		rest++
	}
	if rest == end {
		return line
	}
	return append(bytes.Clone(line[:end]), line[rest:]...)
}

func isHex(b byte) bool {
	return '0' <= b && b <= '9' || 'a' <= b && b <= 'f' || 'A' <= b && b <= 'F'
}

// flush returns a line held back when the stream ended.
func (s *sizeLines) flush() []byte {
	out := s.line
	s.line = nil
	return out
}
