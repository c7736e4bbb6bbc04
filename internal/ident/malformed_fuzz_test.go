package ident

import (
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// malformedURLs is a corpus of inputs FromURL must refuse: wrong schemes,
// control characters anywhere, bad ports, no host, bad hosts and broken
// IPv6 literals.
func malformedURLs() []string {
	var out []string
	for _, scheme := range []string{"ftp", "file", "javascript", "data", "mailto", "ws", "wss", "gopher", "htp", "http2", "httpss", "x-http"} {
		out = append(out, scheme+"://example.com/", scheme+"://example.com/a?b#c")
	}
	base := "http://example.com/path?q=1"
	for c := 0; c < 0x20; c++ {
		for _, at := range []int{0, 7, 12, len(base)} {
			out = append(out, base[:at]+string(rune(c))+base[at:])
		}
	}
	out = append(out, base+"\x7f", "http://exa\x7fmple.com/")
	for _, port := range []string{"65536", "99999", "100000", "-1", "abc", "1e3", "0x50", "80a", "+80", "١٢٣", "8 0", "8080808080808080"} {
		out = append(out, fmt.Sprintf("http://example.com:%s/", port), fmt.Sprintf("https://[::1]:%s/", port))
	}
	out = append(out, []string{"", "example.com", "/path", "//", "http://", "https://", "http:///path", "http://:80/", "http://@/", "http://user@/", "http:example.com", "http:/example.com", "?q", "#f", " "}...)
	// RFC 3986 allows sub-delims (!$&'()*+,;=) in a host name; these are
	// the characters it does not allow.
	for _, c := range []string{" ", "<", ">", "\"", "{", "}", "|", "\\", "^", "`", "%", "%zz", "%4"} {
		out = append(out, "http://exa"+c+"mple.com/")
	}
	out = append(out, []string{"http://[::1/", "http://[zz::1]/", "http://[::1]x/", "http://[1:2:3:4:5:6:7:8:9]/", "http://[]/", "http://[::1]]/", "http://[127.0.0.1]/"}...)
	return out
}

func TestMalformedURLsGetClearErrors(t *testing.T) {
	corpus := malformedURLs()
	require.GreaterOrEqual(t, len(corpus), 200)
	for _, raw := range corpus {
		id, norm, err := FromURL(raw)
		if !assert.Error(t, err, "FromURL(%q) accepted as %s (ident %s)", raw, norm, id) {
			continue
		}
		assert.True(t, strings.HasPrefix(err.Error(), fmt.Sprintf("url %q: ", raw)),
			"the error names the URL: %q", err.Error())
		assert.Greater(t, len(err.Error()), len(fmt.Sprintf("url %q: ", raw))+5, "the error states a rule: %q", err.Error())
	}
	t.Logf("%d malformed URLs", len(corpus))
}
