package engine

import (
	"compress/gzip"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/archiveflow/archiveflow/activities"
	"github.com/archiveflow/archiveflow/internal/egress/egresstest"
	"github.com/archiveflow/archiveflow/internal/netpolicy"
	"github.com/archiveflow/archiveflow/internal/sitemap"
	"github.com/archiveflow/archiveflow/internal/warc"
)

// TestFetchRobotsAndSitemapsRecordEachExchange: robots.txt is fetched with
// the crawl's user agent, its redirect followed; a sitemap too large is a
// problem, not an error; every exchange is a request and a response
// record of the crawl's WARC on this worker, and the temporary files are
// gone; an origin the fetch policy denies is a record with its error and
// was never connected to.
func TestFetchRobotsAndSitemapsRecordEachExchange(t *testing.T) {
	var ua string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/robots.txt":
			ua = r.UserAgent()
			http.Redirect(w, r, "/real-robots.txt", http.StatusMovedPermanently)
		case "/real-robots.txt":
			fmt.Fprint(w, "User-agent: *\nDisallow: /x/\n")
		case "/sitemap.xml":
			fmt.Fprint(w, `<urlset><url><loc>http://a/1</loc></url></urlset>`)
		case "/big.xml":
			fmt.Fprint(w, `<urlset>`+strings.Repeat(" ", 2000)+`</urlset>`)
		default:
			http.NotFound(w, r)
		}
	}))
	defer srv.Close()
	guard := egresstest.Guard(t)
	pol, err := netpolicy.Parse([]string{guard.Addr})
	require.NoError(t, err)
	e := pageEngine(t, t.TempDir(), func(c *Config) { c.Fetch = pol })
	archive := e.cfg.ArchiveDir
	ctx := context.Background()

	rec, err := e.FetchRobots(ctx, activities.RobotsFetch{Ident: "job1", Origin: srv.URL, UserAgent: "UA/1", Timeout: 10 * time.Second})
	require.NoError(t, err)
	assert.Equal(t, "UA/1", ua)
	assert.Equal(t, srv.URL+"/robots.txt", rec.URL)
	assert.Equal(t, 200, rec.Status)
	assert.Equal(t, "User-agent: *\nDisallow: /x/\n", rec.Body)

	res, err := e.FetchSitemaps(ctx, activities.SitemapFetch{Ident: "job1", URLs: []string{srv.URL + "/sitemap.xml", srv.URL + "/big.xml"},
		Limits: sitemap.Limits{MaxBytes: 1000, MaxURLs: 10, MaxFiles: 10}, Timeout: 10 * time.Second})
	require.NoError(t, err)
	assert.Equal(t, []string{"http://a/1"}, res.URLs)
	require.Len(t, res.Problems, 1)
	assert.ErrorIs(t, res.Problems[0].Err, sitemap.ErrTooLarge)

	denied, err := e.FetchRobots(ctx, activities.RobotsFetch{Ident: "job1", Origin: "http://" + guard.Addr, Timeout: 10 * time.Second})
	require.NoError(t, err)
	assert.Zero(t, denied.Status)
	assert.Contains(t, denied.Error, "denied by fetch.deny")
	assert.Zero(t, guard.Connections())
	e.Close(ctx)

	responses := map[string]int{}
	files, err := filepath.Glob(filepath.Join(archive, "crawls", "job1", "warc", "*.warc.gz"))
	require.NoError(t, err)
	require.Len(t, files, 1)
	f, err := os.Open(files[0])
	require.NoError(t, err)
	defer f.Close()
	zr, err := gzip.NewReader(f)
	require.NoError(t, err)
	require.NoError(t, warc.Read(zr, func(h warc.Header, _ io.Reader) error {
		responses[h.Type+" "+h.TargetURI]++
		return nil
	}))
	for _, p := range []string{"/robots.txt", "/real-robots.txt", "/sitemap.xml", "/big.xml"} {
		assert.Equal(t, 1, responses["request "+srv.URL+p], p)
		assert.Equal(t, 1, responses["response "+srv.URL+p], p)
	}
	left, err := filepath.Glob(filepath.Join(e.crawlDir("job1"), "*.warc.gz"))
	require.NoError(t, err)
	assert.Empty(t, left, "the fetch's own WARC files are appended and removed")
}
