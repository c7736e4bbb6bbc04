package wacz

import (
	"net"
	"net/url"
	"sort"
	"strings"
)

// SURT returns the sort-friendly key of raw used as a CDXJ line's first
// field, as web-archive indexes (pywb, py-wacz) write it: scheme, user
// info and fragment dropped; the host lowercased, a leading "www." dropped
// and its labels reversed and joined by commas (an IP address is kept as
// it is); a port other than the scheme's default kept after a colon; then
// ")" and the path (at least "/") with the query's parameters sorted, all
// lowercased. "https://www.Example.com:8080/A?b=2&a=1#x" is
// "com,example:8080)/a?a=1&b=2". A URL that is not http(s) or does not
// parse is returned lowercased. A space is written %20.
func SURT(raw string) string {
	u, err := url.Parse(raw)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return strings.ReplaceAll(strings.ToLower(raw), " ", "%20")
	}
	host := strings.ToLower(u.Hostname())
	port := u.Port()
	if (u.Scheme == "http" && port == "80") || (u.Scheme == "https" && port == "443") {
		port = ""
	}
	var key strings.Builder
	if ip := net.ParseIP(host); ip != nil {
		key.WriteString(host)
	} else {
		host = strings.TrimSuffix(host, ".")
		host = strings.TrimPrefix(host, "www.")
		labels := strings.Split(host, ".")
		for i := len(labels) - 1; i >= 0; i-- {
			key.WriteString(labels[i])
			if i > 0 {
				key.WriteByte(',')
			}
		}
	}
	if port != "" {
		key.WriteString(":" + port)
	}
	key.WriteByte(')')
	path := u.EscapedPath()
	if path == "" {
		path = "/"
	}
	key.WriteString(path)
	if u.RawQuery != "" {
		params := strings.Split(u.RawQuery, "&")
		sort.Strings(params)
		key.WriteString("?" + strings.Join(params, "&"))
	}
	// A space would end the key in a CDXJ line.
	return strings.ReplaceAll(strings.ToLower(key.String()), " ", "%20")
}
