package main

import (
	"archive/zip"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/zap"

	"github.com/archiveflow/archiveflow/config"
	"github.com/archiveflow/archiveflow/internal/archivedir"
	"github.com/archiveflow/archiveflow/internal/backend"
	"github.com/archiveflow/archiveflow/internal/frontier"
	"github.com/archiveflow/archiveflow/internal/ident"
	"github.com/archiveflow/archiveflow/internal/model"
	"github.com/archiveflow/archiveflow/internal/pageindex"
	"github.com/archiveflow/archiveflow/internal/rkeys"
	"github.com/archiveflow/archiveflow/internal/snapindex"
	"github.com/archiveflow/archiveflow/internal/testredis"
	"github.com/archiveflow/archiveflow/internal/wacz"
	"github.com/archiveflow/archiveflow/internal/warc"
)

// captures writes a WARC at path holding one 200 response record per URL
// (text/html, text/css for a .css URL; the date of each: at).
func captures(t *testing.T, path string, at time.Time, urls ...string) {
	t.Helper()
	require.NoError(t, os.MkdirAll(filepath.Dir(path), 0o755))
	f, err := os.Create(path)
	require.NoError(t, err)
	w := warc.NewWriter(f)
	for _, u := range urls {
		ct := "text/html"
		if strings.HasSuffix(u, ".css") {
			ct = "text/css"
		}
		block := "HTTP/1.1 200 OK\r\nContent-Type: " + ct + "\r\n\r\n<p>" + u
		_, err := w.Write(warc.Record{Type: "response", Date: at, TargetURI: u, ContentType: "application/http;msgtype=response", Block: []byte(block)})
		require.NoError(t, err)
	}
	require.NoError(t, f.Close())
}

func writeFile0(t *testing.T, path, content string) {
	t.Helper()
	require.NoError(t, os.MkdirAll(filepath.Dir(path), 0o755))
	require.NoError(t, os.WriteFile(path, []byte(content), 0o644))
}

// waczPages reads pages.jsonl of a WACZ: url → title.
func waczPages(t *testing.T, path string) map[string]string {
	t.Helper()
	zr, err := zip.OpenReader(path)
	require.NoError(t, err)
	defer zr.Close()
	rc, err := zr.Open(wacz.PagesPath)
	require.NoError(t, err)
	b, err := io.ReadAll(rc)
	require.NoError(t, err)
	out := map[string]string{}
	for i, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		if i == 0 {
			continue
		}
		var p struct{ URL, Title, TS string }
		require.NoError(t, json.Unmarshal([]byte(line), &p))
		assert.NotEmpty(t, p.TS, "every exported page was captured: its date is its capture's")
		out[p.URL] = p.Title
	}
	return out
}

// exportJob starts Redis and creates job id there.
func exportJob(t *testing.T, id, url, depth string) (*testredis.Server, *rkeys.Store) {
	t.Helper()
	srv := testredis.Start(t)
	cfg := config.Default()
	store, err := rkeys.NewStore(srv.Client(), backend.StoreOptions(&cfg), zap.NewNop())
	require.NoError(t, err)
	require.NoError(t, store.CreateJob(context.Background(), rkeys.Job{Ident: id, URL: url, FetchDepth: depth,
		Settings: model.Settings{Concurrency: 1}, HooksTotal: 1, WorkflowID: id}))
	return srv, store
}

func TestExportACrawlWritesAValidWACZOfItsSucceededPages(t *testing.T) {
	ctx := context.Background()
	const id = "3mlbkdu1fpo7wt4lr2qf1mpsw"
	start := "https://example.com/"
	srv, store := exportJob(t, id, start, model.FetchInf)
	fr, err := frontier.New(srv.Client(), store.Keys(), frontier.Options{})
	require.NoError(t, err)
	// /elsewhere succeeded on another worker host: its WARC is not here.
	urls := []string{start, "https://example.com/a", "https://example.com/gone", "https://example.com/elsewhere"}
	_, err = fr.SeedList(ctx, id, "test", urls, frontier.Config{MaxDepth: -1, MaxAttempts: 1})
	require.NoError(t, err)
	claimed, _, err := fr.Claim(ctx, id, 4, "t", 0)
	require.NoError(t, err)
	require.Len(t, claimed, 4)
	ids := map[string]int64{}
	for _, p := range claimed {
		ids[p.URL] = p.ID
		st := frontier.StatusSucceeded
		if strings.HasSuffix(p.URL, "/gone") {
			st = frontier.StatusFailed
		}
		_, err := fr.Complete(ctx, id, p.ID, p.Attempts, frontier.Outcome{Status: st})
		require.NoError(t, err)
	}

	archive := t.TempDir()
	at := time.Date(2026, 11, 26, 10, 0, 0, 0, time.UTC)
	warcDir := filepath.Join(archive, "crawls", id, "warc")
	captures(t, filepath.Join(warcDir, id+"-w1-7-00001.warc.gz"), at, start, "https://example.com/style.css")
	captures(t, filepath.Join(warcDir, id+"-w1-7-00002.warc.gz"), at.Add(time.Minute), "https://example.com/a")
	// A page's title is in the crawl's page index (a title.txt, of a page
	// run before it, is the fallback).
	require.NoError(t, pageindex.NewWriter(archivedir.PageIndex(archive, id), "w1-7").Append(
		snapindex.Snapshot{ID: id + "-p2", URL: "https://example.com/a", Page: ids["https://example.com/a"], State: model.StateFinished, SealedAt: at},
		[]model.ArchiveResult{{Plugin: "title", Status: model.StatusSucceeded, Title: "Page\n  A\n", Attempts: 1, EndedAt: at}}))
	writeFile0(t, filepath.Join(archive, "snapshots", id, "title", "title.txt"), "Start")
	// Page WARCs left in a page directory are not the job's WARC.
	captures(t, filepath.Join(archivedir.Page(archive, id, 2), "pagefetch", "page.warc.gz"), at, "https://example.com/a")

	out := filepath.Join(t.TempDir(), "crawl.wacz")
	res := runCLI(t, "", "export", id, "-o", out, "--archive-dir", archive, "--redis-url", srv.URL, "--json")
	require.Equal(t, exitOK, res.code, res.stderr)
	var o exportJSON
	require.NoError(t, json.Unmarshal([]byte(res.stdout), &o))
	assert.Equal(t, out, o.File)
	assert.True(t, o.Crawl)
	assert.Len(t, o.WARCs, 2)
	assert.Equal(t, 3, o.Entries)
	assert.Equal(t, 2, o.Pages)
	assert.Equal(t, 1, o.Uncaptured)

	rep, err := wacz.Validate(out)
	require.NoError(t, err)
	assert.Equal(t, 3, rep.Entries)
	assert.Equal(t, map[string]string{start: "Start", "https://example.com/a": "Page A"}, waczPages(t, out),
		"the pages that succeeded, with their titles; the failed one is not a page of the WACZ")

	// The default file name, and the words.
	wd := t.TempDir()
	t.Chdir(wd)
	res = runCLI(t, "", "export", id, "--archive-dir", archive, "--redis-url", srv.URL)
	require.Equal(t, exitOK, res.code, res.stderr)
	assert.Contains(t, res.stdout, "wrote "+id+".wacz (")
	assert.Contains(t, res.stdout, "2 WARC(s) from "+warcDir+", 3 index line(s), 2 page(s); validated")
	assert.Contains(t, res.stdout, "only this host's WARCs")
	assert.Contains(t, res.stdout, "1 page(s) left out, e.g. https://example.com/elsewhere: no capture of them in these WARCs")
	_, err = wacz.Validate(filepath.Join(wd, id+".wacz"))
	require.NoError(t, err)
}

func TestExportASnapshot(t *testing.T) {
	url := "https://example.com/"
	id, _, err := ident.FromURL(url)
	require.NoError(t, err)
	srv, store := exportJob(t, id, url, model.FetchShallow)
	archive := t.TempDir()
	snap := filepath.Join(archive, "snapshots", id)
	at := time.Date(2026, 11, 26, 10, 0, 0, 0, time.UTC)
	// Two hooks' WARCs, the same base name in different directories.
	captures(t, filepath.Join(snap, "pagefetch", "page.warc.gz"), at, url)
	captures(t, filepath.Join(snap, "wget", "warc", "page.warc.gz"), at.Add(time.Second), url, "https://example.com/favicon.ico")
	writeFile0(t, filepath.Join(snap, "title", "title.txt"), "Example")

	out := filepath.Join(t.TempDir(), "snap.wacz")
	res := runCLI(t, "", "export", url, "-o", out, "--archive-dir", archive, "--redis-url", srv.URL)
	require.Equal(t, exitOK, res.code, res.stderr)
	assert.Contains(t, res.stdout, fmt.Sprintf("2 WARC(s) from %s, 3 index line(s), 1 page(s); validated", snap))
	assert.NotContains(t, res.stdout, "only this host's")
	_, err = wacz.Validate(out)
	require.NoError(t, err)
	assert.Equal(t, map[string]string{url: "Example"}, waczPages(t, out))
	zr, err := zip.OpenReader(out)
	require.NoError(t, err)
	var names []string
	for _, f := range zr.File {
		if strings.HasPrefix(f.Name, wacz.ArchiveDir) {
			names = append(names, f.Name)
		}
	}
	zr.Close()
	assert.Equal(t, []string{"archive/" + id + "-pagefetch-page.warc.gz", "archive/" + id + "-wget-warc-page.warc.gz"}, names)

	// Nothing on this host: exit 3, naming where it looked, and where the
	// seal wrote the job's WACZ once it did.
	res = runCLI(t, "", "export", id, "-o", out, "--archive-dir", t.TempDir(), "--redis-url", srv.URL)
	assert.Equal(t, exitNotFound, res.code)
	assert.Contains(t, res.stderr, "no WARC in ")
	assert.NotContains(t, res.stderr, "its seal wrote")
	require.NoError(t, store.SetArchive(context.Background(), id, rkeys.Archive{WACZ: "/srv/archive/snapshots/" + id + "/" + id + ".wacz", Host: "box7", Bytes: 9}))
	res = runCLI(t, "", "export", id, "-o", out, "--archive-dir", t.TempDir(), "--redis-url", srv.URL)
	assert.Equal(t, exitNotFound, res.code)
	assert.Contains(t, res.stderr, "; its seal wrote the job's WACZ at /srv/archive/snapshots/"+id+"/"+id+".wacz on host box7: copy that, or export there (with that host's archive_dir)\n")
	// An unknown job: exit 3.
	res = runCLI(t, "", "export", "zzzzzzzzzzzzzzzzzzzzzzzzz", "--archive-dir", archive, "--redis-url", srv.URL)
	assert.Equal(t, exitNotFound, res.code, res.stderr)
	// A bad -o: exit 2.
	res = runCLI(t, "", "export", id, "-o", filepath.Join(t.TempDir(), "no", "x.wacz"), "--archive-dir", archive, "--redis-url", srv.URL)
	assert.Equal(t, exitUsage, res.code, res.stderr)
}

func TestExportAnExpiredJobFindsItsPagesInTheWARCs(t *testing.T) {
	const id = "3mlbkdu1fpo7wt4lr2qf1mpsw"
	srv := testredis.Start(t) // the job's keys are gone
	archive := t.TempDir()
	at := time.Date(2026, 11, 26, 10, 0, 0, 0, time.UTC)
	warcDir := filepath.Join(archive, "crawls", id, "warc")
	captures(t, filepath.Join(warcDir, id+"-w1-7-00001.warc.gz"), at, "https://example.com/", "https://example.com/s.css")
	captures(t, filepath.Join(warcDir, id+"-w2-9-00001.warc.gz"), at.Add(time.Minute), "https://example.com/b", "https://example.com/")
	_, err := snapindex.Write(filepath.Join(archive, "snapshots", id), snapindex.Snapshot{ID: id, URL: "https://example.com/"}, nil)
	require.NoError(t, err)

	out := filepath.Join(t.TempDir(), "old.wacz")
	res := runCLI(t, "", "export", id, "-o", out, "--archive-dir", archive, "--redis-url", srv.URL)
	require.Equal(t, exitOK, res.code, res.stderr)
	assert.Contains(t, res.stdout, "2 WARC(s) from "+warcDir+", 4 index line(s), 2 page(s); validated")
	assert.Contains(t, res.stdout, "the job is not in Redis")
	assert.Equal(t, map[string]string{"https://example.com/": "", "https://example.com/b": ""}, waczPages(t, out),
		"each 200 HTML capture once, the stylesheet not a page")
	zr, err := zip.OpenReader(out)
	require.NoError(t, err)
	defer zr.Close()
	rc, err := zr.Open(wacz.DataPackage)
	require.NoError(t, err)
	var dp struct{ MainPageURL, MainPageDate string }
	require.NoError(t, json.NewDecoder(rc).Decode(&dp))
	assert.Equal(t, "https://example.com/", dp.MainPageURL, "the URL of the sealed snapshot index")
	assert.Equal(t, "2026-11-26T10:00:00Z", dp.MainPageDate)

	// Neither in Redis nor on this host: unknown.
	res = runCLI(t, "", "export", id, "-o", out, "--archive-dir", t.TempDir(), "--redis-url", srv.URL)
	assert.Equal(t, exitNotFound, res.code)
	assert.Contains(t, res.stderr, "not found in Redis")
}
