// Package cssurl owns what a crawl reads out of CSS: the URLs a stylesheet,
// a <style> element or a style attribute refers to — @import targets, url()
// values (backgrounds, fonts in @font-face src, cursors, masks, …) and the
// strings of image-set(). It tokenizes as CSS Syntax Level 3 §4 does
// (comments, strings and their escapes, unquoted url() tokens, ident
// sequences with escapes, numbers and their units), so a "url(" inside a
// comment, a string or a longer name is not taken and an escaped URL is
// decoded; it does not parse rules or check values. Refs are returned as
// written: resolving them (against the sheet's own URL, or the page's base
// for inline CSS) is the caller's.
package cssurl

import (
	"bytes"
	"mime"
	"strings"
	"unicode/utf8"

	"golang.org/x/net/html/charset"
)

// Ref is one reference in CSS.
type Ref struct {
	// URL is the reference as written, escapes decoded, not resolved.
	URL string
	// Import: the target of an @import rule, a stylesheet itself.
	Import bool
}

// Refs returns the references in css in source order, duplicates
// included. @namespace and @document preludes name URLs that are not
// fetched and are skipped; so are format(), local() and other strings that
// are not URLs.
func Refs(css string) []Ref {
	var refs []Ref
	t := tokenizer{s: css}
	type frame struct {
		name string // a function's name, lower case, or "" for a plain block
		imp  bool   // url() right after @import
	}
	var stack []frame
	top := func() frame {
		if len(stack) == 0 {
			return frame{}
		}
		return stack[len(stack)-1]
	}
	importing := false // after @import, until its first token
	ignoring := false  // in an @namespace or @document prelude
	for tok := t.next(); tok.kind != tEOF; tok = t.next() {
		if tok.kind == tWhitespace {
			continue
		}
		imp := importing
		importing = false
		switch tok.kind {
		case tAtKeyword:
			switch strings.ToLower(tok.val) {
			case "import":
				importing = true
			case "namespace", "document", "-moz-document":
				ignoring = true
			}
		case tURL:
			if !ignoring {
				refs = append(refs, Ref{URL: tok.val, Import: imp})
			}
		case tFunction:
			stack = append(stack, frame{name: strings.ToLower(tok.val), imp: imp})
		case tString:
			if ignoring {
				break
			}
			switch f := top(); {
			case f.name == "url" || f.name == "src":
				refs = append(refs, Ref{URL: tok.val, Import: f.imp})
			case f.name == "image-set" || f.name == "-webkit-image-set":
				refs = append(refs, Ref{URL: tok.val})
			case imp:
				refs = append(refs, Ref{URL: tok.val, Import: true})
			}
		case tOpen:
			stack = append(stack, frame{})
			if tok.val == "{" {
				ignoring = false
			}
		case tClose:
			if len(stack) > 0 {
				stack = stack[:len(stack)-1]
			}
			if tok.val == "}" {
				ignoring = false
			}
		case tOther:
			if tok.val == ";" {
				ignoring = false
			}
		}
	}
	return refs
}

// Decode returns a stylesheet's text, its encoding chosen as CSS Syntax
// §3.2 says: a byte order mark, else the charset of contentType, else an
// @charset rule opening the sheet, else UTF-8 (the spec's last fallback
// before it, the referring page's encoding, is not known here). Bytes
// invalid in UTF-8 are kept as they are.
func Decode(body []byte, contentType string) string {
	for _, bom := range []struct {
		mark  string
		label string
	}{{"\xef\xbb\xbf", "utf-8"}, {"\xfe\xff", "utf-16be"}, {"\xff\xfe", "utf-16le"}} {
		if bytes.HasPrefix(body, []byte(bom.mark)) {
			return decodeAs(body[len(bom.mark):], bom.label)
		}
	}
	if _, params, err := mime.ParseMediaType(contentType); err == nil && params["charset"] != "" {
		if s, ok := tryDecode(body, params["charset"]); ok {
			return s
		}
	}
	const open = `@charset "`
	if bytes.HasPrefix(body, []byte(open)) {
		rest := body[len(open):]
		if end := bytes.IndexByte(rest, '"'); end >= 0 && end < 64 && bytes.HasPrefix(rest[end:], []byte(`";`)) {
			label := string(rest[:end])
			if l := strings.ToLower(label); l == "utf-16be" || l == "utf-16le" {
				label = "utf-8" // the spec's rule: a sheet that could say so is not UTF-16
			}
			if s, ok := tryDecode(body, label); ok {
				return s
			}
		}
	}
	return string(body)
}

func decodeAs(body []byte, label string) string {
	if s, ok := tryDecode(body, label); ok {
		return s
	}
	return string(body)
}

// tryDecode decodes body from the encoding labelled label; false when the
// label names none.
func tryDecode(body []byte, label string) (string, bool) {
	enc, name := charset.Lookup(label)
	if enc == nil {
		return "", false
	}
	if name == "utf-8" {
		return string(body), true
	}
	out, err := enc.NewDecoder().Bytes(body)
	if err != nil {
		return "", false
	}
	return string(out), true
}

// Token kinds: only those the references depend on are told apart.
type kind uint8

const (
	tEOF kind = iota
	tWhitespace
	tIdent
	tFunction  // val: the name, without "("
	tAtKeyword // val: the name, without "@"
	tString    // val: the value, escapes decoded
	tBadString
	tURL // an unquoted url(…); val: the value, escapes decoded
	tBadURL
	tOpen  // ( [ {
	tClose // ) ] }
	tOther // delimiters, numbers, hashes, : ; , <!-- -->; val: the first character
)

type token struct {
	kind kind
	val  string
}

// tokenizer is CSS Syntax Level 3 §4.3 "consume a token", working on bytes:
// every character that matters is ASCII, and others are copied as they are
// (CR, FF and CRLF count as newlines; NUL decodes as U+FFFD in names,
// strings and URLs, the preprocessing of §3.3).
type tokenizer struct {
	s string
	i int
}

func (t *tokenizer) at(j int) byte {
	if j < len(t.s) {
		return t.s[j]
	}
	return 0
}

func (t *tokenizer) eof(j int) bool { return j >= len(t.s) }

func (t *tokenizer) next() token {
	for {
		if t.eof(t.i) {
			return token{kind: tEOF}
		}
		c := t.s[t.i]
		switch {
		case c == '/' && t.at(t.i+1) == '*':
			if end := strings.Index(t.s[t.i+2:], "*/"); end >= 0 {
				t.i += 2 + end + 2
			} else {
				t.i = len(t.s)
			}
			continue
		case isSpace(c):
			for !t.eof(t.i) && isSpace(t.s[t.i]) {
				t.i++
			}
			return token{kind: tWhitespace}
		case c == '"' || c == '\'':
			return t.str(c)
		case c == '(' || c == '[' || c == '{':
			t.i++
			return token{kind: tOpen, val: string(c)}
		case c == ')' || c == ']' || c == '}':
			t.i++
			return token{kind: tClose, val: string(c)}
		case isDigit(c), (c == '+' || c == '-' || c == '.') && t.startsNumber(t.i):
			t.numeric()
			return token{kind: tOther, val: string(c)}
		case c == '-' && strings.HasPrefix(t.s[t.i:], "-->"):
			t.i += 3
			return token{kind: tOther, val: "-"}
		case c == '<' && strings.HasPrefix(t.s[t.i:], "<!--"):
			t.i += 4
			return token{kind: tOther, val: "<"}
		case c == '@' && t.startsIdent(t.i+1):
			t.i++
			return token{kind: tAtKeyword, val: t.name()}
		case c == '#' && (isName(t.at(t.i+1)) && !t.eof(t.i+1) || t.validEscape(t.i+1)):
			t.i++
			t.name()
			return token{kind: tOther, val: "#"}
		case t.startsIdent(t.i):
			return t.identLike()
		default:
			t.i++
			return token{kind: tOther, val: string(c)}
		}
	}
}

// identLike is §4.3.4: an ident, a function, or url( with its unquoted URL.
func (t *tokenizer) identLike() token {
	name := t.name()
	if t.at(t.i) != '(' || t.eof(t.i) {
		return token{kind: tIdent, val: name}
	}
	t.i++
	if !strings.EqualFold(name, "url") {
		return token{kind: tFunction, val: name}
	}
	j := t.i
	for !t.eof(j) && isSpace(t.s[j]) {
		j++
	}
	if q := t.at(j); !t.eof(j) && (q == '"' || q == '\'') {
		t.i = j
		return token{kind: tFunction, val: name}
	}
	return t.url()
}

// url is §4.3.6: the rest of an unquoted url(…), after "url(".
func (t *tokenizer) url() token {
	var b strings.Builder
	for !t.eof(t.i) && isSpace(t.s[t.i]) {
		t.i++
	}
	for {
		if t.eof(t.i) {
			return token{kind: tURL, val: b.String()} // a parse error; browsers take it
		}
		c := t.s[t.i]
		switch {
		case c == ')':
			t.i++
			return token{kind: tURL, val: b.String()}
		case isSpace(c):
			for !t.eof(t.i) && isSpace(t.s[t.i]) {
				t.i++
			}
			if t.eof(t.i) || t.s[t.i] == ')' {
				t.i = min(t.i+1, len(t.s))
				return token{kind: tURL, val: b.String()}
			}
			t.badURLRemnants()
			return token{kind: tBadURL}
		case c == '"' || c == '\'' || c == '(' || nonPrintable(c):
			t.badURLRemnants()
			return token{kind: tBadURL}
		case c == '\\':
			if !t.validEscape(t.i) {
				t.badURLRemnants()
				return token{kind: tBadURL}
			}
			t.escape(&b)
		default:
			t.literal(&b)
		}
	}
}

// badURLRemnants is §4.3.14: skip to the ")" ending a bad URL.
func (t *tokenizer) badURLRemnants() {
	for !t.eof(t.i) {
		switch {
		case t.s[t.i] == ')':
			t.i++
			return
		case t.validEscape(t.i):
			var discard strings.Builder
			t.escape(&discard)
		default:
			t.i++
		}
	}
}

// str is §4.3.5: a string token ended by quote; an unescaped newline makes
// it a bad string (the newline is left for the next token).
func (t *tokenizer) str(quote byte) token {
	t.i++
	var b strings.Builder
	for {
		if t.eof(t.i) {
			return token{kind: tString, val: b.String()}
		}
		c := t.s[t.i]
		switch {
		case c == quote:
			t.i++
			return token{kind: tString, val: b.String()}
		case isNewline(c):
			return token{kind: tBadString}
		case c == '\\':
			switch {
			case t.eof(t.i + 1):
				t.i++
			case isNewline(t.s[t.i+1]): // an escaped newline continues the string
				t.i += 2
				if t.s[t.i-1] == '\r' && t.at(t.i) == '\n' {
					t.i++
				}
			default:
				t.escape(&b)
			}
		default:
			t.literal(&b)
		}
	}
}

// escape is §4.3.7, at a backslash that is a valid escape (or the sheet's
// last character): up to six hex digits and one whitespace after them, or
// the escaped character itself.
func (t *tokenizer) escape(b *strings.Builder) {
	t.i++ // the backslash
	if t.eof(t.i) {
		b.WriteRune(utf8.RuneError)
		return
	}
	if !isHex(t.s[t.i]) {
		r, size := utf8.DecodeRuneInString(t.s[t.i:])
		if r == 0 {
			r = utf8.RuneError
		}
		if r == utf8.RuneError && size == 1 {
			b.WriteByte(t.s[t.i]) // not UTF-8: keep the byte
		} else {
			b.WriteRune(r)
		}
		t.i += size
		return
	}
	var cp rune
	for n := 0; n < 6 && !t.eof(t.i) && isHex(t.s[t.i]); n++ {
		cp = cp<<4 | hexValue(t.s[t.i])
		t.i++
	}
	if !t.eof(t.i) && isSpace(t.s[t.i]) {
		t.i++
		if t.s[t.i-1] == '\r' && t.at(t.i) == '\n' {
			t.i++
		}
	}
	if cp == 0 || (cp >= 0xD800 && cp <= 0xDFFF) || cp > utf8.MaxRune {
		cp = utf8.RuneError
	}
	b.WriteRune(cp)
}

// literal copies the character at t.i, a NUL as U+FFFD.
func (t *tokenizer) literal(b *strings.Builder) {
	if c := t.s[t.i]; c == 0 {
		b.WriteRune(utf8.RuneError)
	} else {
		b.WriteByte(c)
	}
	t.i++
}

// name is §4.3.12: an ident sequence, escapes decoded.
func (t *tokenizer) name() string {
	var b strings.Builder
	for !t.eof(t.i) {
		switch {
		case isName(t.s[t.i]):
			t.literal(&b)
		case t.validEscape(t.i):
			t.escape(&b)
		default:
			return b.String()
		}
	}
	return b.String()
}

// numeric consumes a number (§4.3.12 "consume a number") and its unit or %.
func (t *tokenizer) numeric() {
	if c := t.at(t.i); c == '+' || c == '-' {
		t.i++
	}
	t.digits()
	if t.at(t.i) == '.' && isDigit(t.at(t.i+1)) {
		t.i++
		t.digits()
	}
	if c := t.at(t.i); c == 'e' || c == 'E' {
		j := t.i + 1
		if s := t.at(j); s == '+' || s == '-' {
			j++
		}
		if isDigit(t.at(j)) {
			t.i = j
			t.digits()
		}
	}
	switch {
	case t.startsIdent(t.i):
		t.name()
	case t.at(t.i) == '%':
		t.i++
	}
}

func (t *tokenizer) digits() {
	for !t.eof(t.i) && isDigit(t.s[t.i]) {
		t.i++
	}
}

// validEscape is §4.3.8 at j: a backslash not followed by a newline.
func (t *tokenizer) validEscape(j int) bool {
	return t.at(j) == '\\' && !t.eof(j) && (t.eof(j+1) || !isNewline(t.s[j+1]))
}

// startsIdent is §4.3.9 at j.
func (t *tokenizer) startsIdent(j int) bool {
	if t.eof(j) {
		return false
	}
	switch c := t.s[j]; {
	case c == '-':
		n := t.at(j + 1)
		return !t.eof(j+1) && (isNameStart(n) || n == '-') || t.validEscape(j+1)
	case c == '\\':
		return t.validEscape(j)
	default:
		return isNameStart(c)
	}
}

// startsNumber is §4.3.10 at j.
func (t *tokenizer) startsNumber(j int) bool {
	switch c := t.at(j); {
	case c == '+' || c == '-':
		return isDigit(t.at(j+1)) || t.at(j+1) == '.' && isDigit(t.at(j+2))
	case c == '.':
		return isDigit(t.at(j + 1))
	default:
		return isDigit(c)
	}
}

func isSpace(c byte) bool   { return c == ' ' || c == '\t' || isNewline(c) }
func isNewline(c byte) bool { return c == '\n' || c == '\r' || c == '\f' }
func isDigit(c byte) bool   { return '0' <= c && c <= '9' }
func isHex(c byte) bool     { return isDigit(c) || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F' }

// isNameStart: a letter, "_", or any non-ASCII byte (a part of a non-ASCII
// character), NUL (U+FFFD after preprocessing) among them.
func isNameStart(c byte) bool {
	return 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || c == '_' || c >= 0x80 || c == 0
}

func isName(c byte) bool { return isNameStart(c) || isDigit(c) || c == '-' }

func nonPrintable(c byte) bool {
	return c <= 0x08 && c != 0 || c == 0x0B || 0x0E <= c && c <= 0x1F || c == 0x7F
}

func hexValue(c byte) rune {
	switch {
	case isDigit(c):
		return rune(c - '0')
	case 'a' <= c && c <= 'f':
		return rune(c-'a') + 10
	default:
		return rune(c-'A') + 10
	}
}
