// Package wgetlog turns GNU Wget's default-verbosity log (run with LC_ALL=C)
// into one Fetch per HTTP request as the log streams by, so a hook can report
// every request wget made while wget is still running.
package wgetlog

import (
	"bufio"
	"fmt"
	"io"
	"regexp"
	"strconv"
	"strings"
)

// Wget codes reported with each fetch (ArchiveBot's wget_code vocabulary).
const (
	CodeFinished     = "RETRFINISHED"
	CodeNetworkError = "NETWORK_ERROR"
)

// Fetch is one HTTP request wget made.
type Fetch struct {
	URL    string
	Status int    // HTTP status; 0 when no response arrived
	Bytes  int64  // body bytes saved, else the announced Length, else 0
	Saved  string // the local file wget saved the body to, if any
	Type   string // the Content-Type wget announced, if any
	Code   string // CodeFinished or CodeNetworkError
	Reason string // wget's message for a failed request
}

var (
	startRe  = regexp.MustCompile(`^--\d{4}-\d\d-\d\d \d\d:\d\d:\d\d--  (?:\(try: ?\d+\)  )?(\S+)$`)
	statusRe = regexp.MustCompile(`^(?:HTTP|Proxy) request sent, awaiting response\.\.\. (\d{3})\b`)
	failRe   = regexp.MustCompile(`(?:^(?:HTTP|Proxy) request sent, awaiting response\.\.\. |\.\.\. )(failed: .*|No data received\..*|Read error.*)$`)
	lengthRe = regexp.MustCompile(`^Length: (\d+|unspecified)(?: \([^)]*\))?(?: \[([^\]]*)\])?`)
	savingRe = regexp.MustCompile(`^Saving to: '(.*)'$`)
	savedRe  = regexp.MustCompile(`' saved \[(\d+)(?:/\d+)?\]$`)
	errorRe  = regexp.MustCompile(`^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d ERROR (\d+): `)
	locRe    = regexp.MustCompile(`^Location: .* \[following\]$`)
	readErr  = regexp.MustCompile(`^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d \(.*\) - Read error at byte (\d+)`)
	resolveE = regexp.MustCompile(`^(?:wget: unable to resolve host address|Resolving .* failed: )`)
)

// Parser accumulates log lines and reports each completed Fetch.
type Parser struct {
	emit func(Fetch)
	cur  *Fetch
}

// NewParser returns a Parser that calls emit once per completed fetch.
func NewParser(emit func(Fetch)) *Parser { return &Parser{emit: emit} }

// Line feeds one log line (without its newline).
func (p *Parser) Line(line string) {
	line = strings.TrimRight(line, "\r")
	if line == "" || line[0] == ' ' {
		return // blank lines and progress dots
	}
	if strings.HasPrefix(line, "--") {
		if m := startRe.FindStringSubmatch(line); m != nil {
			p.flush()
			p.cur = &Fetch{URL: m[1]}
		}
		return
	}
	if p.cur == nil {
		return
	}
	switch {
	case strings.HasPrefix(line, "HTTP request sent"), strings.HasPrefix(line, "Proxy request sent"):
		// Through an HTTP proxy (the fetch policy's) wget says "Proxy
		// request sent" for http:// URLs.
		if m := statusRe.FindStringSubmatch(line); m != nil {
			p.cur.Status, _ = strconv.Atoi(m[1])
			p.cur.Code = CodeFinished
		} else if m := failRe.FindStringSubmatch(line); m != nil {
			p.cur.Reason = m[1]
			p.flush()
		}
	case strings.HasPrefix(line, "Length: "):
		if m := lengthRe.FindStringSubmatch(line); m != nil {
			if n, err := strconv.ParseInt(m[1], 10, 64); err == nil {
				p.cur.Bytes = n
			}
			p.cur.Type = m[2]
		}
	case strings.HasPrefix(line, "Saving to: "):
		if m := savingRe.FindStringSubmatch(line); m != nil {
			p.cur.Saved = m[1]
		}
	case strings.HasPrefix(line, "Location: "):
		if locRe.MatchString(line) {
			p.flush()
		}
	case line[0] >= '0' && line[0] <= '9':
		p.dated(line)
	case resolveE.MatchString(line), strings.HasPrefix(line, "Proxy tunneling failed: "):
		p.cur.Reason = line
		p.flush()
	case strings.Contains(line, "... failed: "):
		if m := failRe.FindStringSubmatch(line); m != nil {
			p.cur.Reason = m[1]
			p.flush()
		}
	}
}

// dated handles the timestamped lines: saved, ERROR and read errors.
func (p *Parser) dated(line string) {
	if m := savedRe.FindStringSubmatch(line); m != nil {
		p.cur.Bytes, _ = strconv.ParseInt(m[1], 10, 64)
		p.flush()
		return
	}
	if m := readErr.FindStringSubmatch(line); m != nil {
		p.cur.Bytes, _ = strconv.ParseInt(m[1], 10, 64)
		p.cur.Reason = "read error"
		p.cur.Code = CodeNetworkError
		p.flush()
		return
	}
	if errorRe.MatchString(line) {
		p.flush()
	}
}

// Close reports the fetch in progress, if any (call at end of log).
func (p *Parser) Close() { p.flush() }

func (p *Parser) flush() {
	if p.cur == nil {
		return
	}
	f := *p.cur
	p.cur = nil
	if f.Status == 0 {
		f.Code = CodeNetworkError
		if f.Reason == "" {
			f.Reason = "no response"
		}
	}
	p.emit(f)
}

// Scan feeds every line of r to p, then closes it.
func (p *Parser) Scan(r io.Reader) error {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64*1024), 1<<20)
	for sc.Scan() {
		p.Line(sc.Text())
	}
	p.Close()
	if err := sc.Err(); err != nil {
		return fmt.Errorf("read wget log: %w", err)
	}
	return nil
}
