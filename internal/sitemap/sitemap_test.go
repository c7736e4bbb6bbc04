package sitemap

import (
	"bytes"
	"compress/gzip"
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func urlset(locs ...string) string {
	var b strings.Builder
	b.WriteString(`<?xml version="1.0" encoding="UTF-8"?><urlset xmlns="http://www.sitemaps.org/schemas/sitemap/0.9">`)
	for _, l := range locs {
		fmt.Fprintf(&b, "<url><loc>%s</loc><lastmod>2024-01-01</lastmod></url>", l)
	}
	b.WriteString("</urlset>")
	return b.String()
}

func index(locs ...string) string {
	var b strings.Builder
	b.WriteString(`<sitemapindex xmlns="http://www.sitemaps.org/schemas/sitemap/0.9">`)
	for _, l := range locs {
		fmt.Fprintf(&b, "<sitemap><loc>%s</loc></sitemap>", l)
	}
	b.WriteString("</sitemapindex>")
	return b.String()
}

func gz(t *testing.T, s string) []byte {
	var b bytes.Buffer
	w := gzip.NewWriter(&b)
	_, err := w.Write([]byte(s))
	require.NoError(t, err)
	require.NoError(t, w.Close())
	return b.Bytes()
}

func TestParseURLSetAndIndex(t *testing.T) {
	doc, err := Parse([]byte(urlset("http://a/1", " http://a/2\n", "http://a/1&amp;x=1")), 1<<20)
	require.NoError(t, err)
	assert.Equal(t, []string{"http://a/1", "http://a/2", "http://a/1&x=1"}, doc.URLs)
	assert.Empty(t, doc.Sitemaps)

	doc, err = Parse([]byte(index("http://a/s1.xml", "http://a/s2.xml.gz")), 1<<20)
	require.NoError(t, err)
	assert.Equal(t, []string{"http://a/s1.xml", "http://a/s2.xml.gz"}, doc.Sitemaps)
	assert.Empty(t, doc.URLs)
}

func TestParseGzip(t *testing.T) {
	doc, err := Parse(gz(t, urlset("http://a/z")), 1<<20)
	require.NoError(t, err)
	assert.Equal(t, []string{"http://a/z"}, doc.URLs)

	_, err = Parse([]byte{0x1f, 0x8b, 1, 2, 3}, 1<<20)
	assert.ErrorContains(t, err, "gzip")
}

func TestParseOversizeCountsDecompressedBytes(t *testing.T) {
	big := urlset(strings.Repeat("http://a/p ", 1)) + strings.Repeat(" ", 4000)
	_, err := Parse([]byte(big), 1000)
	assert.ErrorIs(t, err, ErrTooLarge)
	// Small compressed, large once decompressed: a gzip bomb is cut.
	small := gz(t, big)
	require.Less(t, len(small), 1000)
	_, err = Parse(small, 1000)
	assert.ErrorIs(t, err, ErrTooLarge)
	_, err = Parse([]byte(big), int64(len(big)))
	assert.NoError(t, err)
}

func TestParseMalformed(t *testing.T) {
	for name, in := range map[string]string{
		"html":      "<html><body>not found</body></html>",
		"truncated": `<urlset><url><loc>http://a/1</loc></url>`,
		"text":      "http://a/1\nhttp://a/2\n",
		"empty":     "",
	} {
		t.Run(name, func(t *testing.T) {
			_, err := Parse([]byte(in), 1<<20)
			assert.Error(t, err)
		})
	}
}

func TestWalkIndexesLimitsAndProblems(t *testing.T) {
	files := map[string][]byte{
		"http://a/index.xml":  []byte(index("http://a/s1.xml", "http://a/s2.xml.gz", "http://a/broken.xml", "http://a/index.xml")),
		"http://a/s1.xml":     []byte(urlset("http://a/1", "http://a/2")),
		"http://a/s2.xml.gz":  gz(t, urlset("http://a/2", "http://a/3")),
		"http://a/broken.xml": []byte("<urlset><url>"),
	}
	var fetched []string
	fetch := func(_ context.Context, u string, limit int64) ([]byte, error) {
		fetched = append(fetched, u)
		if b, ok := files[u]; ok {
			return b, nil
		}
		return nil, errors.New("HTTP 404")
	}
	res := Walk(context.Background(), []string{"http://a/index.xml", "http://a/missing.xml"}, fetch, Limits{MaxBytes: 1 << 20, MaxURLs: 100, MaxFiles: 10})
	assert.Equal(t, []string{"http://a/1", "http://a/2", "http://a/3"}, res.URLs)
	assert.Equal(t, 5, res.Files, "each file once: the index naming itself is not read again")
	require.Len(t, res.Problems, 2)
	assert.Equal(t, "http://a/missing.xml", res.Problems[0].URL)
	assert.Equal(t, "http://a/broken.xml", res.Problems[1].URL)
	assert.Empty(t, res.Cuts)

	fetched = nil
	res = Walk(context.Background(), []string{"http://a/index.xml"}, fetch, Limits{MaxBytes: 1 << 20, MaxURLs: 2, MaxFiles: 10})
	assert.Equal(t, []string{"http://a/1", "http://a/2"}, res.URLs)
	require.Len(t, res.Cuts, 1)
	assert.Contains(t, res.Cuts[0], "max_urls")

	fetched = nil
	res = Walk(context.Background(), []string{"http://a/index.xml"}, fetch, Limits{MaxBytes: 1 << 20, MaxURLs: 100, MaxFiles: 2})
	assert.Equal(t, []string{"http://a/index.xml", "http://a/s1.xml"}, fetched)
	assert.Equal(t, []string{"http://a/1", "http://a/2"}, res.URLs)
	require.Len(t, res.Cuts, 1)
	assert.Contains(t, res.Cuts[0], "max_files")
}

// A relative sitemap or page URL means what it would in a browser: it is
// resolved against the file that names it; absolute ones stay as written.
func TestWalkResolvesRelativeURLs(t *testing.T) {
	files := map[string][]byte{
		"http://a/maps/index.xml": []byte(index("part.xml", "/root.xml", "http://b/other.xml")),
		"http://a/maps/part.xml":  []byte(urlset("page1", "/page2", "http://a/x/../page3")),
		"http://a/root.xml":       []byte(urlset("//a/page4")),
		"http://b/other.xml":      []byte(urlset("http://b/5")),
	}
	fetch := func(_ context.Context, u string, limit int64) ([]byte, error) {
		if b, ok := files[u]; ok {
			return b, nil
		}
		return nil, fmt.Errorf("%s: HTTP 404", u)
	}
	res := Walk(context.Background(), []string{"http://a/maps/index.xml"}, fetch, Limits{MaxBytes: 1 << 20, MaxURLs: 100, MaxFiles: 10})
	assert.Empty(t, res.Problems)
	assert.Equal(t, []string{"http://a/maps/page1", "http://a/page2", "http://a/x/../page3", "http://a/page4", "http://b/5"}, res.URLs)
	assert.Equal(t, 4, res.Files)

	assert.Equal(t, "http://a/sitemap.xml", Resolve("http://a/robots.txt", "/sitemap.xml"))
	assert.Equal(t, "https://c/s.xml", Resolve("http://a/robots.txt", "https://c/s.xml"))
	assert.Equal(t, "%zz", Resolve("http://a/robots.txt", "%zz"), "kept: its fetch says what is wrong")
}
