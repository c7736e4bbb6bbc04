package warcsize

import (
	"context"
	"crypto/rand"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"go.uber.org/zap"

	"github.com/archiveflow/archiveflow/activities"
	"github.com/archiveflow/archiveflow/internal/engine"
)

const (
	pages    = 50
	imgBytes = 1 << 20
)

// site serves / linking /p/0.html .. /p/49.html, each showing the same
// 1 MB image as /img/N.png.
func site() *httptest.Server {
	img := make([]byte, imgBytes)
	_, _ = rand.Read(img)
	mux := http.NewServeMux()
	mux.HandleFunc("/img/", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "image/png")
		_, _ = w.Write(img)
	})
	mux.HandleFunc("/p/", func(w http.ResponseWriter, r *http.Request) {
		var n int
		if _, err := fmt.Sscanf(r.URL.Path, "/p/%d.html", &n); err != nil {
			http.NotFound(w, r)
			return
		}
		w.Header().Set("Content-Type", "text/html")
		fmt.Fprintf(w, `<html><head><title>Page %d</title></head><body><h1>Page %d</h1><img src="/img/%d.png"><a href="/">home</a></body></html>`, n, n, n)
	})
	mux.HandleFunc("/{$}", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html")
		fmt.Fprint(w, "<html><head><title>Index</title></head><body>")
		for i := range pages {
			fmt.Fprintf(w, `<a href="/p/%d.html">page %d</a> `, i, i)
		}
		fmt.Fprint(w, "</body></html>")
	})
	return httptest.NewServer(mux)
}

// crawl crawls the site to depth 1 through the engine and returns the job
// WARC's bytes on disk.
func crawl(b *testing.B, srv *httptest.Server) int64 {
	plugins, err := filepath.Abs("../../plugins")
	if err != nil {
		b.Fatal(err)
	}
	archive := b.TempDir()
	e, err := engine.New(engine.Config{PluginDirs: []string{plugins}, ArchiveDir: archive,
		Env: []string{"PATH=" + os.Getenv("PATH")}, Timeout: time.Minute, Grace: time.Second, LineCap: 1 << 20,
		Instance: "bench-1", MaxResponses: 1000, Log: zap.NewNop(), InProcessBuiltins: true})
	if err != nil {
		b.Fatal(err)
	}
	defer e.Close(context.Background())
	cr := activities.Crawl{Job: activities.Job{Ident: "warcsize", URL: srv.URL + "/", SnapshotID: "warcsize"},
		MaxDepth: 1, PagePlugins: []string{"pagefetch", "outlinks"}, PageAttempts: 1, MaxLinks: 1000}
	seen := map[string]bool{srv.URL + "/": true}
	queue := []activities.PageSpec{{ID: 1, URL: srv.URL + "/", Attempt: 1}}
	for len(queue) > 0 {
		p := queue[0]
		queue = queue[1:]
		out, err := e.RunPage(context.Background(), activities.PageRun{Crawl: cr, Page: p})
		if err != nil || out.Status != activities.PageSucceeded {
			b.Fatalf("page %s: %v %s %s", p.URL, err, out.Status, out.Note)
		}
		if p.Depth >= cr.MaxDepth {
			continue
		}
		for _, l := range out.Links {
			if !seen[l.URL] && len(l.URL) > len(srv.URL) && l.URL[:len(srv.URL)] == srv.URL {
				seen[l.URL] = true
				queue = append(queue, activities.PageSpec{ID: int64(len(seen)), URL: l.URL, Depth: p.Depth + 1, Attempt: 1})
			}
		}
	}
	if len(seen) != pages+1 {
		b.Fatalf("crawled %d pages, want %d", len(seen), pages+1)
	}
	if err := e.TeardownCrawl(context.Background(), "warcsize"); err != nil {
		b.Fatal(err)
	}
	return dirBytes(b, filepath.Join(archive, "crawls", "warcsize", "warc"), "*.warc.gz")
}

// wget runs GNU wget -r -l 1 -p --warc-file on the site and returns its
// WARC's bytes on disk.
func wget(b *testing.B, srv *httptest.Server) int64 {
	bin, err := exec.LookPath("wget")
	if err != nil {
		b.Skip("no wget on PATH")
	}
	dir := b.TempDir()
	cmd := exec.Command(bin, "--recursive", "--level=1", "--page-requisites", "--no-parent", "-e", "robots=off",
		"--delete-after", "--no-verbose", "--directory-prefix="+filepath.Join(dir, "files"),
		"--warc-file="+filepath.Join(dir, "wget"), srv.URL+"/")
	if out, err := cmd.CombinedOutput(); err != nil {
		b.Fatalf("wget: %v: %s", err, out)
	}
	return dirBytes(b, dir, "*.warc.gz")
}

func dirBytes(b *testing.B, dir, glob string) int64 {
	files, err := filepath.Glob(filepath.Join(dir, glob))
	if err != nil || len(files) == 0 {
		b.Fatalf("no %s in %s: %v", glob, dir, err)
	}
	var n int64
	for _, f := range files {
		fi, err := os.Stat(f)
		if err != nil {
			b.Fatal(err)
		}
		n += fi.Size()
	}
	return n
}

// BenchmarkWARCSize reports the job WARC's bytes, wget's WARC's bytes and
// their ratio for the 50-page site sharing one 1 MB image.
func BenchmarkWARCSize(b *testing.B) {
	srv := site()
	defer srv.Close()
	var ours, theirs int64
	for b.Loop() {
		ours = crawl(b, srv)
		theirs = wget(b, srv)
	}
	b.ReportMetric(float64(ours), "archiveflow-bytes")
	b.ReportMetric(float64(theirs), "wget-bytes")
	b.ReportMetric(float64(ours)/float64(theirs), "ratio")
	b.Logf("%d pages sharing one %d-byte image under %d URLs: job WARC %d bytes, wget --warc-file %d bytes (%.3f×)",
		pages, imgBytes, pages, ours, theirs, float64(ours)/float64(theirs))
}
