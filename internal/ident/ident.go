// Package ident owns the job identifier: the ArchiveBot-compatible ident
// derived from a seed URL (DESIGN.md §1). ArchiveBot's bot computes it as
// UUIDTools::UUID.sha1_create(NAMESPACE, Addressable::URI.parse(url).normalize.to_s)
// rendered as a 128-bit integer in lower-case base36; archiveflow computes the
// same value so ArchiveBot's own tools can recompute an archiveflow ident from
// the URL.
package ident

import (
	"crypto/sha1"
	"fmt"
	"math/big"
	"net"
	"net/url"
	"strconv"
	"strings"

	"golang.org/x/net/idna"
)

// Namespace is ArchiveBot's UUIDv5 namespace (ARCHIVEBOT_V0_NAMESPACE).
var Namespace = [16]byte{
	0x82, 0x24, 0x4d, 0xe1, 0xc3, 0x54, 0x4c, 0x89,
	0xbf, 0x2b, 0xf1, 0x53, 0xce, 0x23, 0xaf, 0x43,
}

// MaxURLBytes is the longest job URL, after normalisation: a job's URL is
// its workflow's ArchiveflowURL search attribute, a Temporal keyword,
// which Temporal refuses over 2,048 bytes. (A crawl's discovered links are
// not job URLs: the frontier has its own limit.)
const MaxURLBytes = 2048

// FromURL validates raw as an absolute http or https URL with a host, no
// longer than MaxURLBytes once normalised, normalises it the way ArchiveBot
// does and returns the job ident and the normalised URL. Errors name the
// URL and the rule it breaks.
func FromURL(raw string) (ident string, normalized string, err error) {
	normalized, err = Normalize(raw)
	if err != nil {
		return "", "", err
	}
	if len(normalized) > MaxURLBytes {
		return "", "", fmt.Errorf("url %q: %d bytes: a job's URL must be at most %d bytes (it is the job's %s search attribute in Temporal)",
			shorten(raw), len(normalized), MaxURLBytes, "ArchiveflowURL")
	}
	return FromNormalized(normalized), normalized, nil
}

// shorten keeps an over-long URL's start for a message.
func shorten(s string) string {
	const keep = 80
	if len(s) <= keep {
		return s
	}
	return s[:keep] + "…"
}

// FromNormalized computes the ident of an already normalised URL: the
// UUIDv5 (SHA-1) of the URL string in Namespace, as a base36 integer.
func FromNormalized(normalized string) string {
	h := sha1.New()
	h.Write(Namespace[:])
	h.Write([]byte(normalized))
	sum := h.Sum(nil)
	var u [16]byte
	copy(u[:], sum[:16])
	u[6] = (u[6] & 0x0f) | 0x50 // version 5
	u[8] = (u[8] & 0x3f) | 0x80 // RFC 4122 variant
	return new(big.Int).SetBytes(u[:]).Text(36)
}

// Normalize returns the normal form of an absolute http(s) URL, following
// Addressable::URI#normalize as used by ArchiveBot: lower-case scheme and
// host (internationalised hosts in punycode), default port dropped, empty
// path → "/", dot segments removed, percent-encoding normalised (escaped
// unreserved characters decoded, other escapes upper-cased, characters that
// are not allowed in a component escaped as UTF-8 bytes).
func Normalize(raw string) (string, error) {
	if strings.TrimSpace(raw) == "" {
		return "", fmt.Errorf("url %q: must not be empty", raw)
	}
	for _, r := range raw {
		if r < 0x20 || r == 0x7f {
			return "", fmt.Errorf("url %q: must not contain control characters", raw)
		}
	}
	raw = strings.TrimSpace(raw)
	schemeEnd := strings.Index(raw, "://")
	if schemeEnd <= 0 {
		return "", fmt.Errorf("url %q: must be absolute (scheme://host/...)", raw)
	}
	scheme := strings.ToLower(raw[:schemeEnd])
	if scheme != "http" && scheme != "https" {
		return "", fmt.Errorf("url %q: scheme %q is not allowed: must be http or https", raw, scheme)
	}
	rest := raw[schemeEnd+3:]
	authEnd := strings.IndexAny(rest, "/?#")
	if authEnd < 0 {
		authEnd = len(rest)
	}
	authority, rest := rest[:authEnd], rest[authEnd:]
	userinfo, hostport := "", authority
	if at := strings.LastIndex(authority, "@"); at >= 0 {
		userinfo, hostport = authority[:at], authority[at+1:]
	}
	host, port, err := splitHostPort(raw, hostport)
	if err != nil {
		return "", err
	}
	if port == defaultPort(scheme) {
		port = ""
	}

	path, query, fragment := rest, "", ""
	hasQuery, hasFragment := false, false
	if i := strings.IndexByte(path, '#'); i >= 0 {
		fragment, path, hasFragment = path[i+1:], path[:i], true
	}
	if i := strings.IndexByte(path, '?'); i >= 0 {
		query, path, hasQuery = path[i+1:], path[:i], true
	}
	path = removeDotSegments(normalizeEscapes(path, pathChars))
	if path == "" {
		path = "/"
	}

	var b strings.Builder
	b.WriteString(scheme)
	b.WriteString("://")
	if userinfo != "" {
		b.WriteString(normalizeEscapes(userinfo, userinfoChars))
		b.WriteByte('@')
	}
	b.WriteString(host)
	if port != "" {
		b.WriteByte(':')
		b.WriteString(port)
	}
	b.WriteString(path)
	if hasQuery {
		b.WriteByte('?')
		b.WriteString(normalizeEscapes(query, queryChars))
	}
	if hasFragment {
		b.WriteByte('#')
		b.WriteString(normalizeEscapes(fragment, queryChars))
	}
	out := b.String()
	// Final structural check with the standard parser.
	u, err := url.Parse(out)
	if err != nil {
		return "", fmt.Errorf("url %q: not a valid URL after normalisation: %w", raw, err)
	}
	if u.Hostname() == "" {
		return "", fmt.Errorf("url %q: must have a host", raw)
	}
	return out, nil
}

func defaultPort(scheme string) string {
	if scheme == "https" {
		return "443"
	}
	return "80"
}

// splitHostPort separates and normalises the host and port of an authority.
func splitHostPort(raw, hostport string) (host, port string, err error) {
	if strings.HasPrefix(hostport, "[") {
		end := strings.IndexByte(hostport, ']')
		if end < 0 {
			return "", "", fmt.Errorf("url %q: IPv6 host must be closed with ']'", raw)
		}
		host, rest := hostport[:end+1], hostport[end+1:]
		if ip := net.ParseIP(host[1 : len(host)-1]); ip == nil {
			return "", "", fmt.Errorf("url %q: host %q is not a valid IPv6 literal", raw, host)
		}
		if rest != "" && !strings.HasPrefix(rest, ":") {
			return "", "", fmt.Errorf("url %q: unexpected %q after IPv6 host", raw, rest)
		}
		port = strings.TrimPrefix(rest, ":")
		host = strings.ToLower(host)
		return host, port, checkPort(raw, port)
	}
	host = hostport
	if i := strings.LastIndexByte(hostport, ':'); i >= 0 {
		host, port = hostport[:i], hostport[i+1:]
	}
	if host == "" {
		return "", "", fmt.Errorf("url %q: must have a host", raw)
	}
	if strings.ContainsAny(host, " %<>\"{}|\\^`[]:") {
		return "", "", fmt.Errorf("url %q: host %q contains characters not allowed in a host name", raw, host)
	}
	host = strings.ToLower(host)
	if !isASCII(host) {
		ascii, err := idna.Punycode.ToASCII(host)
		if err != nil {
			return "", "", fmt.Errorf("url %q: host %q is not a valid internationalised domain name: %w", raw, host, err)
		}
		host = strings.ToLower(ascii)
	}
	return host, port, checkPort(raw, port)
}

func checkPort(raw, port string) error {
	for _, c := range port {
		if c < '0' || c > '9' {
			return fmt.Errorf("url %q: port %q must be decimal digits", raw, port)
		}
	}
	if n, err := strconv.Atoi(port); len(port) > 5 || err == nil && n > 65535 {
		return fmt.Errorf("url %q: port %q must be at most 65535", raw, port)
	}
	return nil
}

func isASCII(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] >= 0x80 {
			return false
		}
	}
	return true
}

// Character classes allowed unescaped per component (RFC 3986).
const (
	unreserved    = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-._~"
	subDelims     = "!$&'()*+,;="
	userinfoChars = unreserved + subDelims + ":"
	pathChars     = unreserved + subDelims + ":@/"
	queryChars    = pathChars + "?"
)

const upperHex = "0123456789ABCDEF"

// normalizeEscapes decodes escaped unreserved characters, upper-cases other
// escapes, escapes a stray '%' as %25 and escapes every byte outside allowed.
func normalizeEscapes(s, allowed string) string {
	var b strings.Builder
	b.Grow(len(s))
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c == '%' {
			if i+2 < len(s) && isHex(s[i+1]) && isHex(s[i+2]) {
				v := unhex(s[i+1])<<4 | unhex(s[i+2])
				if strings.IndexByte(unreserved, v) >= 0 {
					b.WriteByte(v)
				} else {
					b.WriteByte('%')
					b.WriteByte(upperHex[v>>4])
					b.WriteByte(upperHex[v&15])
				}
				i += 2
				continue
			}
			b.WriteString("%25")
			continue
		}
		if c < 0x80 && strings.IndexByte(allowed, c) >= 0 {
			b.WriteByte(c)
			continue
		}
		b.WriteByte('%')
		b.WriteByte(upperHex[c>>4])
		b.WriteByte(upperHex[c&15])
	}
	return b.String()
}

func isHex(c byte) bool {
	return '0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F'
}

func unhex(c byte) byte {
	switch {
	case '0' <= c && c <= '9':
		return c - '0'
	case 'a' <= c && c <= 'f':
		return c - 'a' + 10
	default:
		return c - 'A' + 10
	}
}

// removeDotSegments implements RFC 3986 §5.2.4 on an absolute path.
func removeDotSegments(p string) string {
	if !strings.Contains(p, ".") {
		return p
	}
	var out []string
	segs := strings.Split(p, "/")
	for i, s := range segs {
		last := i == len(segs)-1
		switch s {
		case ".":
			if last {
				out = append(out, "")
			}
		case "..":
			if len(out) > 1 {
				out = out[:len(out)-1]
			}
			if last {
				out = append(out, "")
			}
		default:
			out = append(out, s)
		}
	}
	res := strings.Join(out, "/")
	if strings.HasPrefix(p, "/") && !strings.HasPrefix(res, "/") {
		res = "/" + res
	}
	return res
}
