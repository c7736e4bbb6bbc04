package archivedir

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

// The layout docs/operations.md and the package doc describe, and names
// made safe as path elements.
func TestLayout(t *testing.T) {
	assert.Equal(t, []string{"/a/snapshots", "/a/crawls"}, Tops("/a"))
	assert.Equal(t, "/a/snapshots/abc", Snapshot("/a", "abc"))
	assert.Equal(t, "/a/crawls/abc", Crawl("/a", "abc"))
	assert.Equal(t, "/a/crawls/abc/warc", CrawlWARCs("/a", "abc"))
	assert.Equal(t, "/a/crawls/abc/pages/12", Page("/a", "abc", 12))
	assert.Equal(t, "/a/crawls/abc/pageindex", PageIndex("/a", "abc"))
	assert.Equal(t, "/a/crawls/abc/box7-42", Setup("/a", "abc", "box7-42"))
	assert.Equal(t, "/a/crawls/_etc_passwd/box_7", Setup("/a", "../etc/passwd", "box 7"), "no element leaves the crawl's directory")

	for in, want := range map[string]string{"abc": "abc", "A.b_c-1": "A.b_c-1", "..": "_", "": "_", ".hidden": "hidden", "a/b": "a_b", "é": "_"} {
		assert.Equal(t, want, Name(in), "%q", in)
	}
}
