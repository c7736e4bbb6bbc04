package robots

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
)

const body = `# test
User-agent: *
Disallow: /private/
Allow: /private/open.html
Crawl-delay: 2

User-agent: archiveteam
Disallow: /no-at/
Crawl-delay: 0.5

Sitemap: http://h/sitemap-a.xml
Sitemap: http://h/sitemap-b.xml.gz
`

func TestCheckGroupsAndRuleNames(t *testing.T) {
	rec := Record{URL: "http://h/robots.txt", Status: 200, Body: body}
	star := Parse(rec, "Mozilla/5.0 (compatible; x)")
	rule, ok := star.Check("http://h/private/x.html?q=1")
	assert.False(t, ok)
	assert.Equal(t, "http://h/robots.txt: User-agent *, Disallow: /private/ (/private/x.html?q=1)", rule)
	_, ok = star.Check("http://h/private/open.html")
	assert.True(t, ok, "the longer Allow wins")
	_, ok = star.Check("http://h/no-at/")
	assert.True(t, ok)
	assert.Equal(t, 2*time.Second, star.CrawlDelay())
	assert.Equal(t, []string{"http://h/sitemap-a.xml", "http://h/sitemap-b.xml.gz"}, star.Sitemaps())

	at := Parse(rec, "ArchiveTeam ArchiveBot/20210517 (wpull 2.0.3)")
	rule, ok = at.Check("http://h/no-at/page")
	assert.False(t, ok)
	assert.Equal(t, "http://h/robots.txt: User-agent archiveteam, Disallow: /no-at/ (/no-at/page)", rule)
	_, ok = at.Check("http://h/private/x.html")
	assert.True(t, ok, "only the most specific group applies")
	assert.Equal(t, 500*time.Millisecond, at.CrawlDelay())
}

func TestStatusMeaning(t *testing.T) {
	for _, c := range []struct {
		rec     Record
		allowed bool
		rule    string
	}{
		{Record{URL: "http://h/robots.txt", Status: 404}, true, ""},
		{Record{URL: "http://h/robots.txt", Status: 403}, true, ""},
		{Record{URL: "http://h/robots.txt", Status: 200, Body: ""}, true, ""},
		{Record{URL: "http://h/robots.txt", Status: 200, Body: "Disallow: /\n"}, true, ""}, // no group: unparsable, no rules
		{Record{URL: "http://h/robots.txt", Status: 503}, false, "http://h/robots.txt: robots.txt answered HTTP 503: RFC 9309 disallows everything"},
		{Record{URL: "http://h/robots.txt", Error: "connection refused"}, false, "http://h/robots.txt: robots.txt could not be fetched (connection refused): RFC 9309 disallows everything"},
	} {
		rule, ok := Parse(c.rec, "x").Check("http://h/a")
		assert.Equal(t, c.allowed, ok, "%+v", c.rec)
		assert.Equal(t, c.rule, rule)
	}
}

func TestOriginAndToken(t *testing.T) {
	o, err := Origin("HTTPS://Example.COM:8443/a/b?c")
	assert.NoError(t, err)
	assert.Equal(t, "https://example.com:8443", o)
	assert.Equal(t, "https://example.com:8443/robots.txt", URL(o))
	_, err = Origin("mailto:x@y")
	assert.Error(t, err)
	assert.Equal(t, "archiveteam", Token("ArchiveTeam ArchiveBot/1"))
	assert.Equal(t, "wget", Token("Wget/1.21"))
}

// TestRuleNamesTheDecidingLine: the rule named is the longest Disallow of
// the agent's group that matches (wildcards as the parser reads them),
// in a group of several User-agent lines, the group named by its own
// name (a prefix of the agent's token).
func TestRuleNamesTheDecidingLine(t *testing.T) {
	rec := Record{URL: "http://h/robots.txt", Status: 200, Body: `User-agent: other
Disallow: /

User-agent: foo
User-agent: archive # a prefix of archiveteam
Disallow: /a/
Disallow: /a/*.pdf$
Disallow: /a/b/
Allow: /a/b/ok

User-agent: *
Disallow: /star/
`}
	r := Parse(rec, "ArchiveTeam ArchiveBot/1")
	for path, want := range map[string]string{
		"/a/x.html":  "http://h/robots.txt: User-agent archive, Disallow: /a/ (/a/x.html)",
		"/a/b/c":     "http://h/robots.txt: User-agent archive, Disallow: /a/b/ (/a/b/c)",
		"/a/doc.pdf": "http://h/robots.txt: User-agent archive, Disallow: /a/*.pdf$ (/a/doc.pdf)",
		"/a/b/ok":    "",
		"/star/x":    "",
	} {
		rule, ok := r.Check("http://h" + path)
		assert.Equal(t, want == "", ok, path)
		assert.Equal(t, want, rule, path)
	}
}
