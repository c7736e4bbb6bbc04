package engine

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"testing"

	"github.com/archiveflow/archiveflow/activities"
)

// BenchmarkRunPage runs crawl pages through RunPage with the default page
// plugins (pagefetch, title, outlinks) in process against a local site:
// the worker's own cost per crawl page, without Temporal or Redis
// (profile it with -cpuprofile/-memprofile; count its system calls with
// strace -c -f).
func BenchmarkRunPage(b *testing.B) {
	mux := http.NewServeMux()
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/s.css":
			w.Header().Set("Content-Type", "text/css")
			fmt.Fprint(w, "body{color:black}")
		case "/i.png":
			w.Header().Set("Content-Type", "image/png")
			fmt.Fprint(w, "\x89PNG\r\n\x1a\n")
		default:
			w.Header().Set("Content-Type", "text/html")
			fmt.Fprintf(w, `<html><head><title>Page %s</title><link rel=stylesheet href="/s.css"></head><body><img src="/i.png">`, r.URL.Path)
			for i := range 6 {
				fmt.Fprintf(w, `<p><a href="/p%d">link %d</a></p>`, i, i)
			}
			fmt.Fprint(w, `</body></html>`)
		}
	})
	srv := httptest.NewServer(mux)
	defer srv.Close()
	plugins, err := filepath.Abs("../../plugins")
	if err != nil {
		b.Fatal(err)
	}
	e := pageEngine(b, plugins, func(c *Config) { c.InProcessBuiltins = true })
	cr := testCrawl("pagefetch", "title", "outlinks")
	cr.Job.URL = srv.URL + "/"
	ctx := context.Background()
	b.ReportAllocs()
	b.ResetTimer()
	for i := range b.N {
		id := int64(i + 2)
		out, err := e.RunPage(ctx, activities.PageRun{Crawl: cr, Page: activities.PageSpec{ID: id, URL: fmt.Sprintf("%s/p%d", srv.URL, id), Depth: 1, Attempt: 1}})
		if err != nil || out.Status != activities.PageSucceeded {
			b.Fatalf("page %d: %v %s %s", id, err, out.Status, out.Note)
		}
	}
}
