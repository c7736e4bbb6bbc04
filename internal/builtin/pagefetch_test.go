package builtin

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/archiveflow/archiveflow/internal/egress"
	"github.com/archiveflow/archiveflow/internal/egress/egresstest"
	"github.com/archiveflow/archiveflow/internal/netpolicy"
	"github.com/archiveflow/archiveflow/internal/warc"
)

// TestPageFetchIsHeldByFetchDeny: pagefetch dials through the hook's
// FETCH_DENY list. A requisite on a denied port is not fetched (no
// Response record) and the page still succeeds; a page redirecting there
// is a final failure naming the rule. The refusal is logged with the
// denied URL as target (the hook's logger already has the page's url).
func TestPageFetchIsHeldByFetchDeny(t *testing.T) {
	guard := egresstest.Guard(t)
	site := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/":
			w.Header().Set("Content-Type", "text/html")
			fmt.Fprintf(w, `<title>p</title><img src="http://%s/i.png"><img src="/ok.png">`, guard.Addr)
		case "/moved":
			http.Redirect(w, r, "http://"+guard.Addr+"/x", http.StatusFound)
		default:
			w.Header().Set("Content-Type", "image/png")
			fmt.Fprint(w, "png")
		}
	}))
	defer site.Close()
	deny, err := json.Marshal([]string{guard.Addr})
	require.NoError(t, err)

	run := func(url string) (recs []map[string]any, log string) {
		t.Helper()
		t.Chdir(t.TempDir())
		var out, errb bytes.Buffer
		code := Run(context.Background(), []string{"pagefetch", "--url=" + url},
			env(map[string]string{"PAGEFETCH_ENABLED": "True", egress.EnvDeny: string(deny)}), &out, &errb)
		require.Equal(t, ExitOK, code, errb.String())
		for _, l := range bytes.Split(bytes.TrimSpace(out.Bytes()), []byte("\n")) {
			var rec map[string]any
			require.NoError(t, json.Unmarshal(l, &rec), string(l))
			recs = append(recs, rec)
		}
		return recs, errb.String()
	}

	recs, log := run(site.URL + "/")
	assert.Equal(t, "succeeded", recs[len(recs)-1]["status"], log)
	var fetched []string
	for _, r := range recs[:len(recs)-1] {
		fetched = append(fetched, fmt.Sprint(r["url"]))
	}
	assert.Equal(t, []string{site.URL + "/", site.URL + "/ok.png"}, fetched, "Response records: the denied requisite has none")
	assert.Contains(t, log, fmt.Sprintf("archiveflow: fetch of http://%s/i.png denied by fetch.deny rule %q\n", guard.Addr, guard.Addr),
		"the refusal's line (egress.Denial.LogLine) is on stderr")

	recs, log = run(site.URL + "/moved")
	last := recs[len(recs)-1]
	assert.Equal(t, "failed", last["status"], log)
	assert.Equal(t, fmt.Sprintf("fetch of http://%s/x denied by fetch.deny rule %q", guard.Addr, guard.Addr), last["error"])
	assert.Zero(t, guard.Connections(), "the denied port was connected to")
}

// TestRedirectLoopIsAFinalFailure: a URL that redirects to itself forever
// is a final `failed` naming the loop (another attempt follows the same
// chain), for pagefetch and the Go fetchers alike, not a transient exit
// without a record.
func TestRedirectLoopIsAFinalFailure(t *testing.T) {
	site := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, r.URL.Path, http.StatusFound)
	}))
	defer site.Close()
	for _, hook := range []string{"pagefetch", "headers"} {
		t.Chdir(t.TempDir())
		var out, errb bytes.Buffer
		code := Run(context.Background(), []string{hook, "--url=" + site.URL + "/loop"},
			env(map[string]string{"PAGEFETCH_ENABLED": "True", egress.EnvDeny: "[]"}), &out, &errb)
		require.Equal(t, ExitOK, code, errb.String())
		lines := bytes.Split(bytes.TrimSpace(out.Bytes()), []byte("\n"))
		var rec map[string]any
		require.NoError(t, json.Unmarshal(lines[len(lines)-1], &rec))
		assert.Equal(t, "failed", rec["status"], hook)
		assert.Contains(t, rec["error"], site.URL+"/loop: more than 20 redirects (a redirect loop)", hook)
	}
}

// TestPageFetchSaysWhenItCutsABody: a page over pagefetch's limit is kept
// cut at the limit, its WARC record marked WARC-Truncated, and a notice
// for the job's log says so (a crawl page's only stderr line that is
// logged), not a silent truncation.
func TestPageFetchSaysWhenItCutsABody(t *testing.T) {
	site := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/octet-stream")
		_, _ = w.Write(make([]byte, maxPageBytes+1024))
	}))
	defer site.Close()
	t.Chdir(t.TempDir())
	var out, errb bytes.Buffer
	code := Run(context.Background(), []string{"pagefetch", "--url=" + site.URL + "/big"},
		env(map[string]string{"PAGEFETCH_ENABLED": "True", egress.EnvDeny: "[]"}), &out, &errb)
	require.Equal(t, ExitOK, code, errb.String())
	assert.Contains(t, errb.String(), "archiveflow: cut: "+site.URL+"/big: body cut at 32 MiB (pagefetch's limit); its WARC record is marked WARC-Truncated: length\n")
	lines := bytes.Split(bytes.TrimSpace(out.Bytes()), []byte("\n"))
	var rec map[string]any
	require.NoError(t, json.Unmarshal(lines[len(lines)-1], &rec))
	assert.Equal(t, "succeeded", rec["status"])
}

// TestPageFetchWARCRecordsTheOriginsAddress: pagefetch as a hook process
// fetches through the attempt's fetch proxy (FETCH_PROXY, a tunnel per
// connection), by name; its request and response records still carry the
// origin's address the proxy connected to (WARC-IP-Address), linked by
// WARC-Concurrent-To, with a payload digest, one gzip member per record.
func TestPageFetchWARCRecordsTheOriginsAddress(t *testing.T) {
	site := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html")
		fmt.Fprint(w, `<title>p</title>`)
	}))
	defer site.Close()
	pol, err := netpolicy.Parse(nil)
	require.NoError(t, err)
	pol = pol.WithLookup(func(context.Context, string) ([]netip.Addr, error) {
		return []netip.Addr{netip.MustParseAddr("127.0.0.1")}, nil
	})
	proxy, err := egress.Start(egress.Options{Policy: pol})
	require.NoError(t, err)
	defer proxy.Close()
	_, port, _ := net.SplitHostPort(site.Listener.Addr().String())

	dir := t.TempDir()
	t.Chdir(dir)
	var out, errb bytes.Buffer
	code := Run(context.Background(), []string{"pagefetch", "--url=http://origin.test:" + port + "/"},
		env(map[string]string{"PAGEFETCH_ENABLED": "True", egress.EnvDeny: "[]", egress.EnvProxy: proxy.URL()}), &out, &errb)
	require.Equal(t, ExitOK, code, errb.String())
	require.Contains(t, out.String(), `"status":"succeeded"`, errb.String())

	data, err := os.ReadFile(filepath.Join(dir, PageFetchWARC))
	require.NoError(t, err)
	_, err = warc.Filter(filepath.Join(dir, PageFetchWARC), nil) // checks one record per gzip member
	require.NoError(t, err)
	var types []string
	ids := map[string]string{}
	require.NoError(t, warc.Read(bytes.NewReader(data), func(h warc.Header, _ io.Reader) error {
		types = append(types, h.Type)
		ids[h.Type] = h.ID
		switch h.Type {
		case "warcinfo":
			return nil
		case "response":
			assert.Equal(t, []string{ids["request"]}, h.ConcurrentTo)
			assert.True(t, strings.HasPrefix(h.Get("WARC-Payload-Digest"), "sha1:"))
		}
		assert.Equal(t, "127.0.0.1", h.Get("WARC-IP-Address"), "%s: the origin's address, not the proxy's", h.Type)
		return nil
	}))
	assert.Equal(t, []string{"warcinfo", "request", "response"}, types)
}
