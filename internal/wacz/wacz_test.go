package wacz

import (
	"archive/zip"
	"bufio"
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"hash"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/archiveflow/archiveflow/internal/warc"
)

var t0 = time.Date(2026, 11, 26, 12, 0, 0, 0, time.UTC)

// writeWARC writes a WARC with internal/warc's writer: for each URL a
// request and a response record (200 text/html, title in the body), a
// warcinfo record first.
func writeWARC(t *testing.T, path string, at time.Time, urls ...string) {
	t.Helper()
	f, err := os.Create(path)
	require.NoError(t, err)
	defer func() { require.NoError(t, f.Close()) }()
	w := warc.NewWriter(f)
	_, err = w.Info(filepath.Base(path), map[string]string{"software": "test"})
	require.NoError(t, err)
	for i, u := range urls {
		date := at.Add(time.Duration(i) * time.Second)
		req := fmt.Sprintf("GET %s HTTP/1.1\r\nHost: x\r\n\r\n", u)
		reqID, err := w.Write(warc.Record{Type: "request", Date: date, TargetURI: u, ContentType: "application/http;msgtype=request", Block: []byte(req)})
		require.NoError(t, err)
		body := "<title>page " + u + "</title>"
		resp := fmt.Sprintf("HTTP/1.1 200 OK\r\nContent-Type: text/html; charset=utf-8\r\nContent-Length: %d\r\n\r\n%s", len(body), body)
		_, err = w.Write(warc.Record{Type: "response", Date: date, TargetURI: u, ContentType: "application/http;msgtype=response",
			Headers: map[string]string{"WARC-Concurrent-To": reqID, "WARC-Payload-Digest": warc.Digest([]byte(body))}, Block: []byte(resp)})
		require.NoError(t, err)
	}
}

func buildFixture(t *testing.T) (dir string, warcs []WARC) {
	dir = t.TempDir()
	a := filepath.Join(dir, "job-host1-00001.warc.gz")
	b := filepath.Join(dir, "job-host2-00001.warc.gz")
	writeWARC(t, a, t0, "https://www.example.com/", "https://example.com/b?z=1&a=2", "https://cdn.example.net/s.css")
	writeWARC(t, b, t0.Add(time.Minute), "https://example.com/a", "http://127.0.0.1:8080/x")
	return dir, Files(a, b)
}

func TestCreateThenValidate(t *testing.T) {
	dir, warcs := buildFixture(t)
	out := filepath.Join(dir, "job.wacz")
	pages := []Page{
		{URL: "https://www.example.com/", Title: "Start"},
		{URL: "https://example.com/a", TS: t0.Add(time.Hour), Title: "A"},
		{URL: "https://example.com/never-captured"},
	}
	res, err := Create(out, warcs, pages, Options{Title: "job", Software: "archiveflow test", MainPageURL: "https://www.example.com/"})
	require.NoError(t, err)
	assert.Equal(t, 2, res.WARCs)
	assert.Equal(t, 5, res.Entries, "one line per response record")
	assert.Equal(t, 2, res.Pages)
	assert.Equal(t, []string{"https://example.com/never-captured"}, res.Uncaptured, "no date, no capture: left out")
	assert.Empty(t, res.Partial)
	if fi, err := os.Stat(out); assert.NoError(t, err) {
		assert.Equal(t, fi.Size(), res.Bytes)
	}

	rep, err := Validate(out)
	require.NoError(t, err)
	assert.Equal(t, Report{Files: 4, Entries: 5, Pages: 2}, rep)

	zr, err := zip.OpenReader(out)
	require.NoError(t, err)
	defer zr.Close()
	got := map[string]string{}
	for _, f := range zr.File {
		assert.Equal(t, zip.Store, f.Method, f.Name)
		if !strings.HasPrefix(f.Name, ArchiveDir) {
			b, err := readEntry(f)
			require.NoError(t, err)
			got[f.Name] = string(b)
		} else {
			// STORED as on disk: byte for byte the WARC.
			rc, err := f.Open()
			require.NoError(t, err)
			b, err := io.ReadAll(rc)
			rc.Close()
			require.NoError(t, err)
			want, err := os.ReadFile(filepath.Join(dir, strings.TrimPrefix(f.Name, ArchiveDir)))
			require.NoError(t, err)
			assert.True(t, bytes.Equal(want, b), f.Name)
		}
	}
	lines := strings.Split(strings.TrimSpace(got[IndexPath]), "\n")
	require.Len(t, lines, 5)
	assert.True(t, strings.HasPrefix(lines[0], "127.0.0.1:8080)/x 20261126120101 {"), lines[0])
	assert.Regexp(t, `^com,example\)/ 20261126120000 \{"url":"https://www.example.com/","mime":"text/html","status":"200","digest":"sha1:[A-Z2-7]+","length":"\d+","offset":"\d+","filename":"job-host1-00001.warc.gz"\}$`, lines[1])
	assert.True(t, strings.HasPrefix(lines[2], "com,example)/a 20261126120100 "), lines[2])
	assert.True(t, strings.HasPrefix(lines[3], "com,example)/b?a=2&z=1 20261126120001 "), lines[3])
	assert.True(t, strings.HasPrefix(lines[4], "net,example,cdn)/s.css "), lines[4])

	assert.Equal(t, pagesHeader+"\n"+
		`{"id":"p1","url":"https://www.example.com/","ts":"2026-11-26T12:00:00Z","title":"Start"}`+"\n"+
		`{"id":"p2","url":"https://example.com/a","ts":"2026-11-26T13:00:00Z","title":"A"}`+"\n", got[PagesPath])

	var dp dataPackage
	require.NoError(t, json.Unmarshal([]byte(got[DataPackage]), &dp))
	assert.Equal(t, "data-package", dp.Profile)
	assert.Equal(t, "1.1.1", dp.WACZVersion)
	assert.Equal(t, "archiveflow test", dp.Software)
	assert.Equal(t, "https://www.example.com/", dp.MainPageURL)
	assert.Equal(t, "2026-11-26T12:00:00Z", dp.MainPageDate)
	var paths []string
	for _, r := range dp.Resources {
		paths = append(paths, r.Path)
		assert.Regexp(t, `^sha256:[0-9a-f]{64}$`, r.Hash)
	}
	assert.Equal(t, []string{"archive/job-host1-00001.warc.gz", "archive/job-host2-00001.warc.gz", IndexPath, PagesPath}, paths)
	assert.Contains(t, got[DataPackageDig], `"path": "datapackage.json"`)
}

// corrupt rewrites the WACZ with one byte of entry name changed at off
// (from the entry's data start).
func corrupt(t *testing.T, path, name string, off int64) {
	t.Helper()
	zr, err := zip.OpenReader(path)
	require.NoError(t, err)
	var start int64 = -1
	for _, f := range zr.File {
		if f.Name == name {
			start, err = f.DataOffset()
			require.NoError(t, err)
		}
	}
	zr.Close()
	require.GreaterOrEqual(t, start, int64(0), name)
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	b[start+off] ^= 0x01
	require.NoError(t, os.WriteFile(path, b, 0o644))
}

func TestValidateNamesTheCorruptFile(t *testing.T) {
	dir, warcs := buildFixture(t)
	for _, name := range []string{"archive/job-host2-00001.warc.gz", IndexPath, PagesPath, DataPackage} {
		t.Run(name, func(t *testing.T) {
			out := filepath.Join(dir, "c.wacz")
			_, err := Create(out, warcs, []Page{{URL: "https://example.com/a"}}, Options{})
			require.NoError(t, err)
			corrupt(t, out, name, 40)
			_, err = Validate(out)
			require.Error(t, err)
			assert.True(t, IsInvalid(err), err)
			assert.Contains(t, err.Error(), name)
			t.Log(err)
		})
	}
}

// rewriteEntry rebuilds a WACZ with one entry's content replaced and its
// datapackage.json hash recomputed, so only the index check can fail.
func rewriteEntry(t *testing.T, path, name string, edit func([]byte) []byte) {
	t.Helper()
	rewrite(t, path, name, true, edit)
}

// rewrite rebuilds a WACZ with one entry's content replaced (valid ZIP
// CRCs); rehash: datapackage.json and its digest updated too.
func rewrite(t *testing.T, path, name string, rehash bool, edit func([]byte) []byte) {
	t.Helper()
	zr, err := zip.OpenReader(path)
	require.NoError(t, err)
	content := map[string][]byte{}
	var order []string
	for _, f := range zr.File {
		b, err := readEntry(f)
		require.NoError(t, err)
		content[f.Name] = b
		order = append(order, f.Name)
	}
	zr.Close()
	content[name] = edit(content[name])
	if rehash {
		var dp dataPackage
		require.NoError(t, json.Unmarshal(content[DataPackage], &dp))
		for i, r := range dp.Resources {
			if r.Path == name {
				dp.Resources[i].Bytes = int64(len(content[name]))
				dp.Resources[i].Hash = sha256String(content[name])
			}
		}
		content[DataPackage], err = json.Marshal(dp)
		require.NoError(t, err)
		content[DataPackageDig], err = json.Marshal(digestFile{Path: DataPackage, Hash: sha256String(content[DataPackage])})
		require.NoError(t, err)
	}
	var buf bytes.Buffer
	zw := zip.NewWriter(&buf)
	for _, n := range order {
		w, err := zw.CreateHeader(&zip.FileHeader{Name: n, Method: zip.Store})
		require.NoError(t, err)
		_, err = w.Write(content[n])
		require.NoError(t, err)
	}
	require.NoError(t, zw.Close())
	require.NoError(t, os.WriteFile(path, buf.Bytes(), 0o644))
}

func TestValidateRecomputesTheHashes(t *testing.T) {
	dir, warcs := buildFixture(t)
	for _, name := range []string{"archive/job-host1-00001.warc.gz", IndexPath, PagesPath, DataPackage} {
		t.Run(name, func(t *testing.T) {
			out := filepath.Join(dir, "h.wacz")
			_, err := Create(out, warcs, []Page{{URL: "https://example.com/a"}}, Options{})
			require.NoError(t, err)
			// The ZIP stays valid (CRCs recomputed); only the package's
			// hashes tell.
			rewrite(t, out, name, false, func(b []byte) []byte {
				b = append([]byte{}, b...)
				b[len(b)/2] ^= 0x20
				return b
			})
			_, err = Validate(out)
			require.Error(t, err)
			assert.True(t, IsInvalid(err), err)
			assert.Contains(t, err.Error(), "invalid WACZ: "+name+": ")
			t.Log(err)
		})
	}
}

func sha256String(b []byte) string {
	h := newSHA()
	h.Write(b)
	return sumString(h)
}

func TestValidateChecksTheIndexAgainstTheRecords(t *testing.T) {
	dir, warcs := buildFixture(t)
	cases := map[string]struct {
		edit func([]byte) []byte
		want string
	}{
		"unsorted": {func(b []byte) []byte {
			l := strings.Split(strings.TrimSpace(string(b)), "\n")
			l[0], l[1] = l[1], l[0]
			return []byte(strings.Join(l, "\n") + "\n")
		}, "not sorted"},
		"wrong offset": {func(b []byte) []byte {
			return []byte(strings.Replace(string(b), `"offset":"`, `"offset":"1`, 1))
		}, "offset"},
		"other url": {func(b []byte) []byte {
			return []byte(strings.Replace(string(b), `"url":"http://127.0.0.1:8080/x"`, `"url":"http://127.0.0.1:8080/y"`, 1))
		}, "SURT"},
		"record of another url": {func(b []byte) []byte {
			s := strings.Replace(string(b), "127.0.0.1:8080)/x ", "127.0.0.1:8080)/y ", 1)
			return []byte(strings.Replace(s, `"url":"http://127.0.0.1:8080/x"`, `"url":"http://127.0.0.1:8080/y"`, 1))
		}, "holds 20261126120101 http://127.0.0.1:8080/x, the line says 20261126120101 http://127.0.0.1:8080/y"},
		"missing warc": {func(b []byte) []byte {
			return []byte(strings.Replace(string(b), `job-host1-00001.warc.gz`, `nope.warc.gz`, 1))
		}, "no such WARC"},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			out := filepath.Join(dir, "i.wacz")
			_, err := Create(out, warcs, nil, Options{})
			require.NoError(t, err)
			rewriteEntry(t, out, IndexPath, c.edit)
			_, err = Validate(out)
			require.Error(t, err)
			assert.True(t, IsInvalid(err), err)
			assert.Contains(t, err.Error(), IndexPath)
			assert.Contains(t, err.Error(), c.want)
			t.Log(err)
		})
	}
}

func TestAWARCBeingWrittenIsTakenUpToItsLastCompleteRecord(t *testing.T) {
	dir, warcs := buildFixture(t)
	whole, err := os.ReadFile(warcs[1].Path)
	require.NoError(t, err)
	// Half of another member appended: a record being written.
	extra := filepath.Join(dir, "extra.warc.gz")
	writeWARC(t, extra, t0.Add(time.Hour), "https://example.com/late")
	eb, err := os.ReadFile(extra)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(warcs[1].Path, append(append([]byte{}, whole...), eb[:len(eb)-30]...), 0o644))

	out := filepath.Join(dir, "p.wacz")
	res, err := Create(out, warcs, nil, Options{})
	require.NoError(t, err)
	assert.Equal(t, []string{warcs[1].Path}, res.Partial)
	_, err = Validate(out)
	require.NoError(t, err)
	zr, err := zip.OpenReader(out)
	require.NoError(t, err)
	defer zr.Close()
	for _, f := range zr.File {
		if f.Name == "archive/job-host2-00001.warc.gz" {
			assert.Greater(t, f.UncompressedSize64, uint64(len(whole)), "the complete members of the extra WARC are kept")
			assert.Less(t, f.UncompressedSize64, uint64(len(whole)+len(eb)-30))
		}
	}
}

func TestIndexRefusesWhatCannotBeAddressed(t *testing.T) {
	dir := t.TempDir()
	// One gzip member holding the whole file: no record has an offset.
	src := filepath.Join(dir, "src.warc.gz")
	writeWARC(t, src, t0, "https://example.com/")
	var plain bytes.Buffer
	f, err := os.Open(src)
	require.NoError(t, err)
	zr, err := gzip.NewReader(bufio.NewReader(f))
	require.NoError(t, err)
	_, err = io.Copy(&plain, zr)
	require.NoError(t, err)
	f.Close()
	var whole bytes.Buffer
	zw := gzip.NewWriter(&whole)
	_, _ = zw.Write(plain.Bytes())
	require.NoError(t, zw.Close())
	wholePath := filepath.Join(dir, "whole.warc.gz")
	require.NoError(t, os.WriteFile(wholePath, whole.Bytes(), 0o644))
	_, _, err = IndexWARC(wholePath, "whole.warc.gz")
	require.ErrorIs(t, err, errMultiRecord)
	assert.Contains(t, err.Error(), wholePath)

	plainPath := filepath.Join(dir, "plain.warc")
	require.NoError(t, os.WriteFile(plainPath, plain.Bytes(), 0o644))
	_, _, err = IndexWARC(plainPath, "plain.warc")
	require.ErrorContains(t, err, "not a gzip member")

	_, err = Create(filepath.Join(dir, "x.wacz"), Files(src, filepath.Join(t.TempDir(), "src.warc.gz")), nil, Options{})
	require.ErrorContains(t, err, "two WARCs named src.warc.gz")
	_, err = Create(filepath.Join(dir, "x.wacz"), []WARC{{Path: src, Name: "a/b.warc.gz"}}, nil, Options{})
	require.ErrorContains(t, err, `WARC name "a/b.warc.gz"`)
}

func TestSURT(t *testing.T) {
	for raw, want := range map[string]string{
		"https://www.Example.com:8080/A?b=2&a=1#x": "com,example:8080)/a?a=1&b=2",
		"http://example.com":                       "com,example)/",
		"http://example.com:80/p":                  "com,example)/p",
		"https://example.com:443/p":                "com,example)/p",
		"http://sub.example.co.uk/a%20b":           "uk,co,example,sub)/a%20b",
		"http://127.0.0.2:9000/cdn/1.css":          "127.0.0.2:9000)/cdn/1.css",
		"urn:x-test:Thing":                         "urn:x-test:thing",
		"http://example.com/?q=a b":                "com,example)/?q=a%20b",
	} {
		assert.Equal(t, want, SURT(raw), raw)
	}
}

func newSHA() hash.Hash { return sha256.New() }

// TestRevisitRecordsAreIndexed: a crawl's job WARC holds revisit records
// for payloads it stored before (warc.Append); each gets its own line, the
// replay finding the payload through the original's.
func TestRevisitRecordsAreIndexed(t *testing.T) {
	dir := t.TempDir()
	page := filepath.Join(dir, "page.warc.gz")
	writeWARC(t, page, t0, "https://example.com/x", "https://example.com/y") // two payloads
	src, err := os.Open(page)
	require.NoError(t, err)
	defer src.Close()
	fi, err := src.Stat()
	require.NoError(t, err)
	job := filepath.Join(dir, "job-w1-1-00001.warc.gz")
	out, err := os.Create(job)
	require.NoError(t, err)
	idx := warc.NewDigests()
	for range 2 { // the same page twice: the second time its responses are revisits
		_, err = warc.Append(out, src, fi.Size(), idx)
		require.NoError(t, err)
	}
	require.NoError(t, out.Close())

	wz := filepath.Join(dir, "r.wacz")
	res, err := Create(wz, Files(job), nil, Options{})
	require.NoError(t, err)
	assert.Equal(t, 4, res.Entries)
	_, err = Validate(wz)
	require.NoError(t, err)
	es, _, err := IndexWARC(job, "job.warc.gz")
	require.NoError(t, err)
	var mimes []string
	for _, e := range es {
		mimes = append(mimes, e.Mime+" "+strconv.Itoa(e.Status))
	}
	assert.Equal(t, []string{"text/html 200", "text/html 200", "warc/revisit 200", "warc/revisit 200"}, mimes)
}

// entries reads a WACZ's entries whole (test sizes).
func entries(t *testing.T, path string) map[string][]byte {
	t.Helper()
	zr, err := zip.OpenReader(path)
	require.NoError(t, err)
	defer zr.Close()
	out := map[string][]byte{}
	for _, f := range zr.File {
		b, err := readEntry(f)
		require.NoError(t, err)
		out[f.Name] = b
	}
	return out
}

func TestALargeIndexIsCompressedInBlocks(t *testing.T) {
	dir, warcs := buildFixture(t)
	plain := filepath.Join(dir, "plain.wacz")
	_, err := Create(plain, warcs, nil, Options{})
	require.NoError(t, err)
	small := filepath.Join(dir, "small.wacz")
	_, err = Create(small, warcs, nil, Options{CompressIndexAbove: 5, IndexBlockLines: 2})
	require.NoError(t, err)
	assert.Contains(t, entries(t, small), IndexPath, "5 lines are not above 5")

	big := filepath.Join(dir, "big.wacz")
	res, err := Create(big, warcs, nil, Options{CompressIndexAbove: 4, IndexBlockLines: 2})
	require.NoError(t, err)
	assert.Equal(t, 5, res.Entries)
	rep, err := Validate(big)
	require.NoError(t, err)
	assert.Equal(t, 5, rep.Entries)

	got := entries(t, big)
	assert.NotContains(t, got, IndexPath)
	idx := strings.Split(strings.TrimSpace(string(got[IndexIdxPath])), "\n")
	require.Len(t, idx, 4, "the !meta line and one line per block of 2")
	assert.Equal(t, idxMeta, idx[0])
	assert.Regexp(t, `^127\.0\.0\.1:8080\)/x 20261126120101 \{"offset":0,"length":\d+\}$`, idx[1])
	assert.Regexp(t, `^com,example\)/a 20261126120100 \{"offset":\d+,"length":\d+\}$`, idx[2])
	assert.Regexp(t, `^net,example,cdn\)/s\.css 20261126120002 \{"offset":\d+,"length":\d+\}$`, idx[3])
	zr, err := gzip.NewReader(bytes.NewReader(got[CompressedIndexPath])) // multistream: all blocks
	require.NoError(t, err)
	lines, err := io.ReadAll(zr)
	require.NoError(t, err)
	assert.Equal(t, string(entries(t, plain)[IndexPath]), string(lines), "the same lines as index.cdxj")

	for name, c := range map[string]struct {
		file string
		edit func([]byte) []byte
		want string
	}{
		"block offset": {IndexIdxPath, func(b []byte) []byte {
			return []byte(strings.Replace(string(b), `{"offset":0,`, `{"offset":1,`, 1))
		}, "want the next block"},
		"block key": {IndexIdxPath, func(b []byte) []byte {
			return []byte(strings.Replace(string(b), "127.0.0.1:8080)/x 20261126120101", "127.0.0.1:8080)/w 20261126120101", 1))
		}, "is not the block's first line's key"},
		"meta": {IndexIdxPath, func(b []byte) []byte {
			return []byte(strings.Replace(string(b), "cdxj-gzip-1.0", "cdxj-gzip-9", 1))
		}, "line 1: want !meta"},
		"block bytes": {CompressedIndexPath, func(b []byte) []byte {
			b = append([]byte{}, b...)
			b[len(b)-6] ^= 0xff // the last block's CRC-32
			return b
		}, "block at"},
	} {
		t.Run(name, func(t *testing.T) {
			out := filepath.Join(dir, "c.wacz")
			_, err := Create(out, warcs, nil, Options{CompressIndexAbove: 4, IndexBlockLines: 2})
			require.NoError(t, err)
			rewriteEntry(t, out, c.file, c.edit)
			_, err = Validate(out)
			require.Error(t, err)
			assert.True(t, IsInvalid(err), err)
			assert.Contains(t, err.Error(), c.file)
			assert.Contains(t, err.Error(), c.want)
			t.Log(err)
		})
	}
}
