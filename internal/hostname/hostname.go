// Package hostname owns the name a target host goes by in per-host rules
// (the host budget's politeness and backoff, per-host limits, a page
// batch's share per host): its host name in lower case, without port or
// brackets. It does no I/O, so wire types and workflow code may use it;
// internal/hostbudget's Lua (host_of) derives the same name from a URL.
package hostname

import (
	"fmt"
	"net/url"
	"strings"
)

// Of is the name of rawURL's host.
func Of(rawURL string) (string, error) {
	u, err := url.Parse(rawURL)
	if err != nil {
		return "", err
	}
	h := strings.ToLower(u.Hostname())
	if h == "" {
		return "", fmt.Errorf("url %q has no host", rawURL)
	}
	return h, nil
}
