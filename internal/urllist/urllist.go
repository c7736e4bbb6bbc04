// Package urllist owns the rules of a list of URLs, one per line: the
// `starter submit -i FILE` file and the list an ArchiveBot `!a <` / `!ao <`
// job names (its url_file). Blank lines and lines starting with # are
// skipped; every other line must be one http(s) URL, and each one that is
// not is reported with its line number and the rule it breaks. The list as
// a whole must be text and stay within the size and count limits of config
// crawl.url_list.
package urllist

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"strings"
	"unicode/utf8"

	"github.com/archiveflow/archiveflow/config"
	"github.com/archiveflow/archiveflow/internal/scope"
)

// Limits bound one list.
type Limits struct {
	MaxBytes int64 // the list's size
	MaxURLs  int   // the URLs it names
}

// LimitsOf are the configured limits (config crawl.url_list).
func LimitsOf(c config.URLList) Limits { return Limits{MaxBytes: c.MaxBytes, MaxURLs: c.MaxURLs} }

// Errors that refuse a whole list.
var (
	ErrTooLarge = errors.New("the list is larger than the limit")
	ErrTooMany  = errors.New("the list names more URLs than the limit")
	ErrNotText  = errors.New("the list is not text")
)

// Entry is one URL of the list.
type Entry struct {
	Line int    // 1-based line number
	Text string // the line as written (trimmed)
	URL  string // canonical form (internal/scope.Canonical)
}

// BadLine is a line that is neither blank, a comment nor one http(s) URL.
type BadLine struct {
	Line int
	Text string
	Rule string
}

func (b BadLine) Error() string { return fmt.Sprintf("line %d: %.200q: %s", b.Line, b.Text, b.Rule) }

// List is a parsed list: its URLs in order and its bad lines.
type List struct {
	URLs []Entry
	Bad  []BadLine
}

// Parse reads a list from r. A list over the limits or not text is
// refused whole (ErrTooLarge, ErrTooMany, ErrNotText, naming the limit or
// the line); bad lines are returned in Bad and the others kept.
func Parse(r io.Reader, lim Limits) (List, error) {
	var l List
	if lim.MaxBytes <= 0 || lim.MaxURLs <= 0 {
		return l, fmt.Errorf("url list limits %+v: max bytes and max urls must be > 0", lim)
	}
	br := bufio.NewReader(io.LimitReader(r, lim.MaxBytes+1))
	var read int64
	for n := 1; ; n++ {
		raw, err := br.ReadBytes('\n')
		read += int64(len(raw))
		if read > lim.MaxBytes {
			return List{}, fmt.Errorf("%w: more than %d bytes (config crawl.url_list.max_bytes)", ErrTooLarge, lim.MaxBytes)
		}
		if len(raw) > 0 {
			if err := l.add(n, raw, lim); err != nil {
				return List{}, err
			}
		}
		if errors.Is(err, io.EOF) {
			return l, nil
		}
		if err != nil {
			return List{}, fmt.Errorf("read line %d: %w", n, err)
		}
	}
}

func (l *List) add(n int, raw []byte, lim Limits) error {
	if bytes.IndexByte(raw, 0) >= 0 || !utf8.Valid(raw) {
		return fmt.Errorf("%w: line %d is not UTF-8 text", ErrNotText, n)
	}
	line := strings.TrimSpace(string(raw))
	if line == "" || strings.HasPrefix(line, "#") {
		return nil
	}
	if strings.ContainsAny(line, " \t\v\f") {
		l.Bad = append(l.Bad, BadLine{Line: n, Text: line, Rule: "must be one URL (no spaces inside)"})
		return nil
	}
	u, err := scope.Canonical(line)
	if err != nil {
		rule := "must be an http(s) URL"
		if !errors.Is(err, scope.ErrNotHTTP) {
			rule = fmt.Sprintf("must be a valid URL (%v)", err)
		}
		l.Bad = append(l.Bad, BadLine{Line: n, Text: line, Rule: rule})
		return nil
	}
	if len(l.URLs) == lim.MaxURLs {
		return fmt.Errorf("%w: line %d is URL %d, more than %d (config crawl.url_list.max_urls)", ErrTooMany, n, lim.MaxURLs+1, lim.MaxURLs)
	}
	l.URLs = append(l.URLs, Entry{Line: n, Text: line, URL: u})
	return nil
}
