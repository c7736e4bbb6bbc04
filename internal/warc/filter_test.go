package warc

import (
	"bytes"
	"compress/gzip"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// sample is a WARC file written by this package's Writer: warcinfo, then
// request and response for two URLs, one gzip member each.
type sample struct {
	data    []byte
	members [][]byte // the gzip member of each record
	ids     []string // record ids, in order
}

const (
	urlA = "http://a.example/"
	urlB = "http://b.example/refused"
)

func writeSample(t *testing.T) sample {
	t.Helper()
	var buf bytes.Buffer
	w := NewWriter(&buf)
	var s sample
	var off int64
	add := func(id string, err error) {
		require.NoError(t, err)
		s.ids = append(s.ids, id)
		s.members = append(s.members, buf.Bytes()[off:w.Written()])
		off = w.Written()
	}
	add(w.Info("sample.warc.gz", map[string]string{"software": "archiveflow-test"}))
	for _, u := range []string{urlA, urlB} {
		reqID, err := w.Write(Record{Type: "request", TargetURI: u, ContentType: "application/http;msgtype=request",
			Block: []byte("GET / HTTP/1.1\r\nHost: " + u + "\r\n\r\n")})
		add(reqID, err)
		add(w.Write(Record{Type: "response", TargetURI: u, ContentType: "application/http;msgtype=response",
			Headers: map[string]string{"WARC-Concurrent-To": reqID},
			Block:   []byte("HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhello")}))
	}
	s.data = buf.Bytes()
	return s
}

// raw returns the uncompressed bytes of each member.
func (s sample) raw(t *testing.T) [][]byte {
	t.Helper()
	var out [][]byte
	for _, m := range s.members {
		zr, err := gzip.NewReader(bytes.NewReader(m))
		require.NoError(t, err)
		b, err := io.ReadAll(zr)
		require.NoError(t, err)
		out = append(out, b)
	}
	return out
}

func writeFile(t *testing.T, name string, data []byte) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	require.NoError(t, os.WriteFile(p, data, 0o640))
	return p
}

type readRecord struct {
	h     Header
	block string
}

func readFile(t *testing.T, path string) []readRecord {
	t.Helper()
	f, err := os.Open(path)
	require.NoError(t, err)
	defer f.Close()
	var out []readRecord
	require.NoError(t, Read(f, func(h Header, block io.Reader) error {
		b, err := io.ReadAll(block)
		out = append(out, readRecord{h, string(b)})
		return err
	}))
	return out
}

func dirNames(t *testing.T, dir string) []string {
	t.Helper()
	ents, err := os.ReadDir(dir)
	require.NoError(t, err)
	var names []string
	for _, e := range ents {
		names = append(names, e.Name())
	}
	return names
}

func TestFilterDropsRequestRecords(t *testing.T) {
	s := writeSample(t)
	path := writeFile(t, "crawl.warc.gz", s.data)

	var seen []Header
	dropped, err := Filter(path, func(h Header) bool {
		seen = append(seen, h)
		return h.Type == "request" && h.TargetURI == urlB
	})
	require.NoError(t, err)
	assert.Equal(t, 1, dropped)

	// The callback saw every record with its headers.
	require.Len(t, seen, 5)
	assert.Equal(t, []string{"warcinfo", "request", "response", "request", "response"},
		[]string{seen[0].Type, seen[1].Type, seen[2].Type, seen[3].Type, seen[4].Type})
	for i, h := range seen {
		assert.Equal(t, s.ids[i], h.ID)
		assert.Equal(t, Version, h.Version)
	}
	assert.Equal(t, urlB, seen[4].TargetURI)
	assert.Equal(t, []string{s.ids[3]}, seen[4].ConcurrentTo)
	assert.Equal(t, "sample.warc.gz", seen[0].Get("warc-filename"))
	assert.Equal(t, "application/http;msgtype=response", seen[4].Get("CONTENT-TYPE"))
	assert.Empty(t, seen[4].Get("X-Missing"))

	// Kept records are their original gzip members, byte for byte.
	got, err := os.ReadFile(path)
	require.NoError(t, err)
	want := bytes.Join([][]byte{s.members[0], s.members[1], s.members[2], s.members[4]}, nil)
	assert.Equal(t, want, got)

	recs := readFile(t, path)
	require.Len(t, recs, 4)
	assert.Equal(t, []string{s.ids[0], s.ids[1], s.ids[2], s.ids[4]},
		[]string{recs[0].h.ID, recs[1].h.ID, recs[2].h.ID, recs[3].h.ID})
	assert.Equal(t, "HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhello", recs[3].block)

	fi, err := os.Stat(path)
	require.NoError(t, err)
	assert.Equal(t, os.FileMode(0o640), fi.Mode().Perm())
	assert.Equal(t, []string{"crawl.warc.gz"}, dirNames(t, filepath.Dir(path)), "no temp file left")
}

func TestFilterNothingToDrop(t *testing.T) {
	s := writeSample(t)
	path := writeFile(t, "crawl.warc.gz", s.data)
	old := time.Now().Add(-time.Hour).Truncate(time.Second)
	require.NoError(t, os.Chtimes(path, old, old))

	for _, drop := range []func(Header) bool{nil, func(h Header) bool { return h.Type == "revisit" }} {
		dropped, err := Filter(path, drop)
		require.NoError(t, err)
		assert.Zero(t, dropped)
		fi, err := os.Stat(path)
		require.NoError(t, err)
		assert.True(t, fi.ModTime().Equal(old), "mtime %v, want %v", fi.ModTime(), old)
		got, err := os.ReadFile(path)
		require.NoError(t, err)
		assert.Equal(t, s.data, got)
	}

	empty := writeFile(t, "empty.warc.gz", nil)
	dropped, err := Filter(empty, func(Header) bool { return true })
	require.NoError(t, err)
	assert.Zero(t, dropped)
}

func TestFilterUncompressed(t *testing.T) {
	s := writeSample(t)
	raw := s.raw(t)
	path := writeFile(t, "crawl.warc", bytes.Join(raw, nil))

	dropped, err := Filter(path, func(h Header) bool { return h.TargetURI == urlB })
	require.NoError(t, err)
	assert.Equal(t, 2, dropped)
	got, err := os.ReadFile(path)
	require.NoError(t, err)
	assert.Equal(t, bytes.Join(raw[:3], nil), got)

	recs := readFile(t, path)
	require.Len(t, recs, 3)
	assert.Equal(t, "response", recs[2].h.Type)
	assert.Equal(t, urlA, recs[2].h.TargetURI)
}

func TestFilterCorruptFile(t *testing.T) {
	s := writeSample(t)
	raw := s.raw(t)
	lastOff := len(s.data) - len(s.members[4])
	thirdOff := len(s.members[0]) + len(s.members[1])
	flipped := bytes.Clone(s.data)
	flipped[thirdOff+len(s.members[2])/2] ^= 0xff
	plain := bytes.Join(raw, nil)
	plainThird := len(raw[0]) + len(raw[1])
	blockLen := len("HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhello")
	shorter := bytes.Replace(raw[2], []byte(fmt.Sprintf("Content-Length: %d\r\n", blockLen)),
		[]byte(fmt.Sprintf("Content-Length: %d\r\n", blockLen-1)), 1)
	require.NotEqual(t, raw[2], shorter)
	badLength := bytes.Join([][]byte{raw[0], raw[1], shorter, raw[3], raw[4]}, nil)

	for _, tc := range []struct {
		name, file string
		data       []byte
		offset     int
	}{
		{"truncated gzip", "t.warc.gz", s.data[:len(s.data)-10], lastOff},
		{"corrupt gzip member", "c.warc.gz", flipped, thirdOff},
		{"garbage after members", "g.warc.gz", append(bytes.Clone(s.data), "junk"...), len(s.data)},
		{"gzip member without WARC", "n.warc.gz", append(bytes.Clone(s.data), gzipped(t, []byte("hello\r\n\r\n"))...), len(s.data)},
		{"no version line", "v.warc", append([]byte("HTTP/1.1 200 OK\r\n"), plain...), 0},
		{"truncated uncompressed", "tu.warc", plain[:len(plain)-3], len(plain) - len(raw[4])},
		{"wrong Content-Length", "l.warc", badLength, plainThird},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := writeFile(t, tc.file, tc.data)
			dropped, err := Filter(path, func(Header) bool { return true })
			require.Error(t, err)
			t.Log(err)
			assert.Zero(t, dropped)
			assert.ErrorContains(t, err, path)
			assert.ErrorContains(t, err, fmt.Sprintf("offset %d:", tc.offset))
			got, rerr := os.ReadFile(path)
			require.NoError(t, rerr)
			assert.Equal(t, tc.data, got, "file unchanged")
			assert.Len(t, dirNames(t, filepath.Dir(path)), 1, "no temp file left")
		})
	}
}

func gzipped(t *testing.T, data []byte) []byte {
	t.Helper()
	var b bytes.Buffer
	zw := gzip.NewWriter(&b)
	_, err := zw.Write(data)
	require.NoError(t, err)
	require.NoError(t, zw.Close())
	return b.Bytes()
}

func TestFilterWholeFileGzip(t *testing.T) {
	s := writeSample(t)
	data := gzipped(t, bytes.Join(s.raw(t), nil))
	path := writeFile(t, "whole.warc.gz", data)

	dropped, err := Filter(path, func(h Header) bool { return h.Type == "request" })
	require.Error(t, err)
	assert.True(t, errors.Is(err, ErrMultiRecordMember), "%v", err)
	assert.ErrorContains(t, err, "not one record per gzip member")
	assert.ErrorContains(t, err, "offset 0:")
	assert.Zero(t, dropped)
	got, err := os.ReadFile(path)
	require.NoError(t, err)
	assert.Equal(t, data, got)

	// Read still reads such a file.
	assert.Len(t, readFile(t, path), 5)
}

func TestReadHeaderFields(t *testing.T) {
	rec := "WARC/1.0\r\n" +
		"WARC-Type: response\r\n" +
		"WARC-Target-URI: <http://x.example/a b>\r\n" +
		"WARC-Concurrent-To: <urn:uuid:1>\r\n" +
		"WARC-Concurrent-To: <urn:uuid:2>\r\n" +
		"X-Folded: one\r\n\ttwo\r\n" +
		"Content-Length: 3\r\n\r\nabc\r\n\r\n"
	recs := readFile(t, writeFile(t, "h.warc", []byte(rec+rec)))
	require.Len(t, recs, 2)
	h := recs[0].h
	assert.Equal(t, "WARC/1.0", h.Version)
	assert.Equal(t, "http://x.example/a b", h.TargetURI)
	assert.Equal(t, "<http://x.example/a b>", h.Get("warc-target-uri"))
	assert.Equal(t, []string{"<urn:uuid:1>", "<urn:uuid:2>"}, h.ConcurrentTo)
	assert.Equal(t, "one two", h.Get("x-folded"))
	assert.Equal(t, int64(3), h.ContentLength)
	assert.Equal(t, "abc", recs[1].block)

	stop := errors.New("stop")
	err := Read(strings.NewReader(rec), func(Header, io.Reader) error { return stop })
	assert.ErrorIs(t, err, stop)
	err = Read(strings.NewReader(strings.Replace(rec, "Content-Length: 3\r\n", "", 1)), func(Header, io.Reader) error { return nil })
	assert.ErrorContains(t, err, "Content-Length")
}

// TestFilterWgetOutput filters what GNU wget writes with --warc-file.
func TestFilterWgetOutput(t *testing.T) {
	wget, err := exec.LookPath("wget")
	if err != nil {
		t.Skip("wget not installed")
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/refused" { // what the fetch policy proxy answers
			http.Error(w, "refused by fetch policy", http.StatusForbidden)
			return
		}
		_, _ = io.WriteString(w, "kept page")
	}))
	defer srv.Close()
	refused := srv.URL + "/refused"

	for _, tc := range []struct{ name, ext, flag string }{
		{"gzip", ".warc.gz", ""},
		{"uncompressed", ".warc", "--no-warc-compression"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			args := []string{"-q", "--no-config", "--no-proxy", "--no-hsts", "--tries=1",
				"--warc-file=" + filepath.Join(dir, "archive"), "--warc-tempdir=" + dir,
				"-P", filepath.Join(dir, "dl")}
			if tc.flag != "" {
				args = append(args, tc.flag)
			}
			cmd := exec.Command(wget, append(args, srv.URL+"/page", refused)...)
			cmd.Dir = dir
			cmd.Env = append(os.Environ(), "HOME="+dir)
			out, err := cmd.CombinedOutput()
			var exit *exec.ExitError
			if err != nil && !(errors.As(err, &exit) && exit.ExitCode() == 8) { // 8: server error response
				require.NoError(t, err, "%s", out)
			}
			path := filepath.Join(dir, "archive"+tc.ext)
			orig, err := os.ReadFile(path)
			require.NoError(t, err, "%s", out)

			before := readFile(t, path)
			spans, err := scan(bytes.NewReader(orig), nil)
			require.NoError(t, err)
			require.Len(t, spans, len(before), "one record per gzip member")
			t.Logf("wget wrote %d records in %d bytes", len(before), len(orig))
			var end int64
			for _, sp := range spans { // the spans tile the file
				assert.Equal(t, end, sp.off)
				end = sp.off + sp.n
			}
			assert.Equal(t, int64(len(orig)), end)

			isRefusedRequest := func(h Header) bool { return h.Type == "request" && h.TargetURI == refused }
			dropped, err := Filter(path, isRefusedRequest)
			require.NoError(t, err)
			assert.Equal(t, 1, dropped)

			var want []byte
			var wantRecs []readRecord
			for i, r := range before {
				if !isRefusedRequest(r.h) {
					want = append(want, orig[spans[i].off:spans[i].off+spans[i].n]...)
					wantRecs = append(wantRecs, r)
				}
			}
			got, err := os.ReadFile(path)
			require.NoError(t, err)
			assert.Equal(t, want, got)
			assert.Equal(t, wantRecs, readFile(t, path))
			types := map[string]int{}
			for _, r := range wantRecs {
				types[r.h.Type]++
			}
			assert.Equal(t, 1, types["request"], "the request to %s stays", srv.URL+"/page")
			assert.Equal(t, 2, types["response"], "both responses stay")
		})
	}
}

// TestEditReplacesABlock: a record given a new block keeps its version line
// and fields in order, with Content-Length and WARC-Block-Digest
// recomputed, as one gzip member (uncompressed in a plain file); every
// other record stays byte for byte.
func TestEditReplacesABlock(t *testing.T) {
	s := writeSample(t)
	newBlock := []byte("GET /refused HTTP/1.1\r\nHost: b.example\r\n\r\n")
	edit := func(h Header, block io.Reader) (Change, error) {
		if h.Type == "request" && h.TargetURI == urlB {
			return Change{Block: newBlock}, nil
		}
		return Change{}, nil
	}
	for _, tc := range []struct {
		name string
		data []byte
	}{{"crawl.warc.gz", s.data}, {"crawl.warc", bytes.Join(s.raw(t), nil)}} {
		path := writeFile(t, tc.name, tc.data)
		changed, err := Edit(path, edit)
		require.NoError(t, err, tc.name)
		assert.Equal(t, 1, changed, tc.name)
		recs := readFile(t, path)
		require.Len(t, recs, 5, tc.name)
		got := recs[3]
		assert.Equal(t, string(newBlock), got.block, tc.name)
		assert.Equal(t, s.ids[3], got.h.ID, tc.name)
		assert.Equal(t, Version, got.h.Version, tc.name)
		assert.Equal(t, strconv.Itoa(len(newBlock)), got.h.Get("Content-Length"), tc.name)
		assert.Equal(t, Digest(newBlock), got.h.Get("WARC-Block-Digest"), tc.name)
		var names []string
		for _, f := range got.h.Fields {
			names = append(names, f.Name)
		}
		assert.Equal(t, []string{"WARC-Type", "WARC-Record-ID", "WARC-Date", "WARC-Target-URI", "Content-Type", "WARC-Block-Digest", "Content-Length"}, names, tc.name)
		data, err := os.ReadFile(path)
		require.NoError(t, err)
		if strings.HasSuffix(tc.name, ".gz") {
			// The records around it are their original members.
			assert.True(t, bytes.HasPrefix(data, bytes.Join(s.members[:3], nil)), tc.name)
			assert.True(t, bytes.HasSuffix(data, s.members[4]), tc.name)
			_, err := Filter(path, nil) // one record per gzip member still
			require.NoError(t, err)
		}
	}
}
