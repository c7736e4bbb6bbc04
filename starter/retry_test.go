package main

import (
	"bytes"
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/archiveflow/archiveflow/internal/frontier"
	"github.com/archiveflow/archiveflow/internal/submit"
)

// A crawl's retry names how many pages it retries and the first few, with
// their depth and last note flattened to one line.
func TestPrintRetryListsTheFirstPagesOfACrawl(t *testing.T) {
	var out bytes.Buffer
	a := &app{stdout: &out}
	r := submit.Retried{Crawl: true, PageCount: 7}
	for i := range 7 {
		r.Pages = append(r.Pages, frontier.Page{URL: fmt.Sprintf("http://x/%d", i), Depth: 2, Note: "500 Internal\nServer Error"})
	}
	printRetry(a, "id1", "http://x/", r)
	assert.Equal(t, `retrying 7 failed page(s) of crawl id1 (http://x/):
  http://x/0 (depth 2): 500 Internal Server Error
  http://x/1 (depth 2): 500 Internal Server Error
  http://x/2 (depth 2): 500 Internal Server Error
  http://x/3 (depth 2): 500 Internal Server Error
  http://x/4 (depth 2): 500 Internal Server Error
  … and 2 more (--json lists them)
`, out.String())

	out.Reset()
	printRetry(a, "id2", "http://y/", submit.Retried{Hooks: []string{"wget/on_Snapshot__50_wget.py"}})
	assert.Equal(t, "retrying 1 failed hook(s) of id2 (http://y/): wget/on_Snapshot__50_wget.py\n", out.String())
}
