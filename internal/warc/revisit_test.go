package warc

import (
	"bytes"
	"compress/gzip"
	"crypto/rand"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// pageWARC writes a page WARC the way pagefetch does: a warcinfo record,
// then a request and a response record per fetch. truncated marks the
// response of that URL WARC-Truncated.
type pageWARC struct {
	buf bytes.Buffer
	w   *Writer
}

func newPageWARC(t *testing.T, software string) *pageWARC {
	p := &pageWARC{}
	p.w = NewWriter(&p.buf)
	_, err := p.w.Info("page.warc.gz", map[string]string{"software": software})
	require.NoError(t, err)
	return p
}

func (p *pageWARC) fetch(t *testing.T, uri string, payload []byte, extra map[string]string) (reqID, respID string) {
	t.Helper()
	reqID, err := p.w.Write(Record{Type: "request", TargetURI: uri, ContentType: "application/http;msgtype=request",
		Block: []byte("GET / HTTP/1.1\r\nHost: x\r\n\r\n")})
	require.NoError(t, err)
	headers := map[string]string{"WARC-Concurrent-To": reqID, "WARC-Payload-Digest": Digest(payload), "WARC-IP-Address": "127.0.0.1"}
	for k, v := range extra {
		headers[k] = v
	}
	block := append([]byte("HTTP/1.1 200 OK\r\nContent-Type: image/png\r\nContent-Length: "+strconv.Itoa(len(payload))+"\r\n\r\n"), payload...)
	respID, err = p.w.Write(Record{Type: "response", TargetURI: uri, Date: time.Date(2026, 11, 26, 10, 0, 0, 0, time.UTC),
		ContentType: "application/http;msgtype=response", Headers: headers, Block: block})
	require.NoError(t, err)
	return reqID, respID
}

// members maps each record id of a .warc.gz to its gzip member's bytes,
// failing unless every member holds exactly one record.
func members(t *testing.T, data []byte) (map[string][]byte, []Header) {
	t.Helper()
	var hs []Header
	spans, err := scan(bytes.NewReader(data), func(h Header) bool { hs = append(hs, h); return false })
	require.NoError(t, err, "one record per gzip member")
	require.Len(t, spans, len(hs))
	out := map[string][]byte{}
	for i, s := range spans {
		out[hs[i].ID] = data[s.off : s.off+s.n]
	}
	return out, hs
}

func randomBytes(n int) []byte {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return b
}

func TestAppendWritesRepeatedPayloadsAsRevisits(t *testing.T) {
	img, other := randomBytes(100_000), randomBytes(5_000)
	page := newPageWARC(t, Software()+" (pagefetch)")
	_, first := page.fetch(t, "http://a.test/img.png", img, nil)
	_, _ = page.fetch(t, "http://a.test/other.png", other, nil)
	secondReq, second := page.fetch(t, "http://a.test/copy.png", img, nil)
	_, cut := page.fetch(t, "http://a.test/cut.png", img, map[string]string{"WARC-Truncated": "length"})
	_, empty := page.fetch(t, "http://a.test/empty", nil, nil)
	_, empty2 := page.fetch(t, "http://a.test/empty2", nil, nil)
	src := page.buf.Bytes()

	var dst bytes.Buffer
	idx := NewDigests()
	st, err := Append(&dst, bytes.NewReader(src), int64(len(src)), idx)
	require.NoError(t, err)
	require.NoError(t, st.Verbatim)
	assert.Equal(t, 1, st.Revisits, "only the complete repeated non-empty payload")
	assert.Equal(t, 1, st.InfoDropped, "archiveflow's page warcinfo gives way to the job file's")
	assert.Equal(t, int64(len(img)), st.SavedBytes)
	assert.Equal(t, int64(dst.Len()), st.Written)
	assert.Less(t, dst.Len(), len(src)-len(img)/2)

	in, _ := members(t, src)
	out, hs := members(t, dst.Bytes())
	require.Len(t, hs, 12, "six requests, six responses (one a revisit); no warcinfo")
	for _, h := range hs {
		if h.ID == second {
			continue
		}
		assert.Equal(t, in[h.ID], out[h.ID], "%s %s is copied byte for byte", h.Type, h.TargetURI)
	}
	for _, id := range []string{cut, empty, empty2} {
		assert.NotNil(t, out[id], "a truncated or empty payload is kept as it is")
	}

	var rev Header
	var revBlock string
	require.NoError(t, Read(bytes.NewReader(out[second]), func(h Header, block io.Reader) error {
		rev = h
		b, err := io.ReadAll(block)
		revBlock = string(b)
		return err
	}))
	assert.Equal(t, "revisit", rev.Type)
	assert.Equal(t, second, rev.ID, "the record keeps its id: its request still names it")
	assert.Equal(t, []string{secondReq}, rev.ConcurrentTo)
	assert.Equal(t, "http://a.test/copy.png", rev.TargetURI)
	assert.Equal(t, RevisitProfile, rev.Get("WARC-Profile"))
	assert.Equal(t, first, rev.Get("WARC-Refers-To"))
	assert.Equal(t, "http://a.test/img.png", rev.Get("WARC-Refers-To-Target-URI"))
	assert.Equal(t, "2026-11-26T10:00:00.000000Z", rev.Get("WARC-Refers-To-Date"))
	assert.Equal(t, Digest(img), rev.Get("WARC-Payload-Digest"))
	assert.Equal(t, "127.0.0.1", rev.Get("WARC-IP-Address"))
	assert.Equal(t, "application/http;msgtype=response", rev.Get("Content-Type"))
	assert.Equal(t, "HTTP/1.1 200 OK\r\nContent-Type: image/png\r\nContent-Length: 100000\r\n\r\n", revBlock, "the HTTP header, no payload")
	assert.Equal(t, Digest([]byte(revBlock)), rev.Get("WARC-Block-Digest"))
	assert.Empty(t, rev.Get("WARC-Truncated"))

	// The index carries over to the next page's file: its copy is a revisit
	// of the first page's record, and a third-party warcinfo is kept.
	page2 := newPageWARC(t, "Wget/1.21.3")
	_, again := page2.fetch(t, "http://b.test/img.png", img, nil)
	src2 := page2.buf.Bytes()
	var dst2 bytes.Buffer
	st, err = Append(&dst2, bytes.NewReader(src2), int64(len(src2)), idx)
	require.NoError(t, err)
	assert.Equal(t, AppendStats{Records: 3, Revisits: 1, SavedBytes: int64(len(img)), Written: int64(dst2.Len())}, st)
	out2, hs2 := members(t, dst2.Bytes())
	assert.Equal(t, "warcinfo", hs2[0].Type)
	assert.NotNil(t, out2[again])
	assert.Equal(t, "revisit", hs2[2].Type)
	assert.Equal(t, first, hs2[2].Get("WARC-Refers-To"))
}

func TestAppendCopiesOtherFilesAsTheyAre(t *testing.T) {
	plain := []byte("WARC/1.0\r\nWARC-Type: resource\r\nContent-Length: 2\r\n\r\nhi\r\n\r\n")
	var dst bytes.Buffer
	st, err := Append(&dst, bytes.NewReader(plain), int64(len(plain)), nil)
	require.NoError(t, err)
	assert.Error(t, st.Verbatim)
	assert.Equal(t, plain, dst.Bytes())

	// A whole-file gzip (several records in one member) is not split.
	var whole bytes.Buffer
	zw := gzip.NewWriter(&whole)
	_, _ = zw.Write(append(append([]byte{}, plain...), plain...))
	require.NoError(t, zw.Close())
	dst.Reset()
	st, err = Append(&dst, bytes.NewReader(whole.Bytes()), int64(whole.Len()), nil)
	require.NoError(t, err)
	assert.ErrorIs(t, st.Verbatim, ErrMultiRecordMember)
	assert.Equal(t, whole.Bytes(), dst.Bytes())
}

func TestDigestsPersist(t *testing.T) {
	path := filepath.Join(t.TempDir(), "digests.tsv")
	d, err := OpenDigests(path)
	require.NoError(t, err)
	d.Add("SHA1:ABC", Original{TargetURI: "http://x/a", Date: "2026-01-01T00:00:00Z", ID: "<urn:uuid:1>"})
	d.Add("sha1:ABC", Original{TargetURI: "http://x/b"})
	d.Add("sha1:TAB", Original{TargetURI: "http://x/\tb"})
	require.NoError(t, d.Err())
	require.NoError(t, d.Close())
	// A writer that died mid-line.
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND, 0)
	require.NoError(t, err)
	_, _ = f.WriteString("sha1:CUT\t<urn:uuid:2>\t2026")
	require.NoError(t, f.Close())

	d, err = OpenDigests(path)
	require.NoError(t, err)
	o, ok := d.Lookup("sha1:ABC")
	require.True(t, ok)
	assert.Equal(t, Original{TargetURI: "http://x/a", Date: "2026-01-01T00:00:00Z", ID: "<urn:uuid:1>"}, o, "the first record wins")
	_, ok = d.Lookup("sha1:CUT")
	assert.False(t, ok, "a cut line is not an entry")
	_, ok = d.Lookup("sha1:TAB")
	assert.False(t, ok, "a URI with a tab is kept in memory only")
	d.Add("sha1:NEXT", Original{TargetURI: "http://x/n", ID: "<urn:uuid:3>"})
	require.NoError(t, d.Close())
	d, err = OpenDigests(path)
	require.NoError(t, err)
	defer d.Close()
	o, ok = d.Lookup("sha1:NEXT")
	require.True(t, ok, "the entry after a cut line is read")
	assert.Equal(t, "http://x/n", o.TargetURI)
	assert.Equal(t, 2, d.Len())
}

// BenchmarkAppend: the cost of appending a small page's WARC (a 5 KB page
// and a 2 KB stylesheet) with revisit detection, its payloads new or both
// stored before, against copying it.
func BenchmarkAppend(b *testing.B) {
	t := &testing.T{}
	page := newPageWARC(t, Software()+" (pagefetch)")
	page.fetch(t, "http://a.test/", randomBytes(5000), nil)
	page.fetch(t, "http://a.test/s.css", randomBytes(2000), nil)
	src := page.buf.Bytes()
	b.Run("new", func(b *testing.B) { // every payload new: copied
		for b.Loop() {
			if _, err := Append(io.Discard, bytes.NewReader(src), int64(len(src)), NewDigests()); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("revisits", func(b *testing.B) { // every payload stored before
		idx := NewDigests()
		for b.Loop() {
			if _, err := Append(io.Discard, bytes.NewReader(src), int64(len(src)), idx); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("copy", func(b *testing.B) {
		for b.Loop() {
			if _, err := io.Copy(io.Discard, bytes.NewReader(src)); err != nil {
				b.Fatal(err)
			}
		}
	})
}

func TestSoftwareNamesArchiveflowAndItsVersion(t *testing.T) {
	s := Software()
	assert.Regexp(t, `^archiveflow/[0-9A-Za-z.+-]+$`, s, "a tagged version, a VCS revision or devel")
	assert.False(t, ownInfo(strings.NewReader("")), "an empty block names nothing")
	assert.True(t, ownInfo(strings.NewReader("format: WARC\r\nsoftware: "+s+" (pagefetch)\r\n")))
	assert.False(t, ownInfo(strings.NewReader("software: Wget/1.21.3 (linux-gnu)\r\n")))
}

// A page WARC whose writer was killed mid-record: its whole records are
// appended, the cut one left out, so the job's file stays readable.
func TestAppendLeavesOutACutLastRecord(t *testing.T) {
	page := newPageWARC(t, "Wget/1.21.3")
	_, whole := page.fetch(t, "http://a.test/", randomBytes(3000), nil)
	n := page.buf.Len()
	page.fetch(t, "http://a.test/cut", randomBytes(3000), nil)
	src := page.buf.Bytes()[:n+(page.buf.Len()-n)/2]
	var dst bytes.Buffer
	st, err := Append(&dst, bytes.NewReader(src), int64(len(src)), nil)
	require.NoError(t, err)
	require.NoError(t, st.Verbatim)
	assert.Error(t, st.Damaged)
	assert.Equal(t, 4, st.Records, "warcinfo, the first request, its response and the second request")
	assert.Equal(t, src[:dst.Len()], dst.Bytes(), "copied byte for byte")
	assert.Equal(t, int64(len(src)), st.Written+st.DamagedBytes, "the cut response is what is left out")
	assert.Greater(t, dst.Len(), n)
	out, hs := members(t, dst.Bytes())
	assert.NotNil(t, out[whole])
	assert.Equal(t, "request", hs[len(hs)-1].Type)
}

// wgetRecord is one WARC/1.0 record as GNU wget writes it (the target URI
// in angle brackets), in its own gzip member.
func wgetRecord(t *testing.T, fields [][2]string, block []byte) []byte {
	t.Helper()
	var head strings.Builder
	head.WriteString("WARC/1.0\r\n")
	for _, f := range fields {
		head.WriteString(f[0] + ": " + f[1] + "\r\n")
	}
	head.WriteString("WARC-Block-Digest: " + Digest(block) + "\r\n")
	head.WriteString("Content-Length: " + strconv.Itoa(len(block)) + "\r\n\r\n")
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	_, _ = zw.Write([]byte(head.String()))
	_, _ = zw.Write(block)
	_, _ = zw.Write([]byte("\r\n\r\n"))
	require.NoError(t, zw.Close())
	return buf.Bytes()
}

// TestAppendWritesWARC10AsWARC11: wget's WARC/1.0 records join the job's
// file as WARC/1.1 (one version per file): the same fields and block, the
// target URI without its angle brackets; a repeated payload among them is a
// 1.1 revisit.
func TestAppendWritesWARC10AsWARC11(t *testing.T) {
	img := randomBytes(200_000)
	idx := NewDigests()
	idx.Add(Digest(img), Original{TargetURI: "http://a.test/img.png", Date: "2026-11-26T10:00:00Z", ID: "<urn:uuid:first>"})
	body := randomBytes(100_000)
	resp := append([]byte("HTTP/1.1 200 OK\r\nContent-Length: 100000\r\n\r\n"), body...)
	dup := append([]byte("HTTP/1.1 200 OK\r\nContent-Length: 200000\r\n\r\n"), img...)
	var src []byte
	src = append(src, wgetRecord(t, [][2]string{{"WARC-Type", "warcinfo"}, {"WARC-Record-ID", "<urn:uuid:info>"},
		{"Content-Type", "application/warc-fields"}}, []byte("software: Wget/1.21.3 (linux-gnu)\r\n"))...)
	src = append(src, wgetRecord(t, [][2]string{{"WARC-Type", "response"}, {"WARC-Target-URI", "<http://b.test/>"},
		{"WARC-Date", "2026-11-26T11:00:00Z"}, {"WARC-Record-ID", "<urn:uuid:resp>"}, {"WARC-Payload-Digest", Digest(body)},
		{"Content-Type", "application/http;msgtype=response"}}, resp)...)
	src = append(src, wgetRecord(t, [][2]string{{"WARC-Type", "response"}, {"WARC-Target-URI", "<http://b.test/img.png>"},
		{"WARC-Date", "2026-11-26T11:00:01Z"}, {"WARC-Record-ID", "<urn:uuid:dup>"}, {"WARC-Payload-Digest", Digest(img)},
		{"Content-Type", "application/http;msgtype=response"}}, dup)...)

	var dst bytes.Buffer
	st, err := Append(&dst, bytes.NewReader(src), int64(len(src)), idx)
	require.NoError(t, err)
	assert.Equal(t, 2, st.Upgraded, "the warcinfo and the first response")
	assert.Equal(t, 1, st.Revisits)
	_, hs := members(t, dst.Bytes())
	require.Len(t, hs, 3)
	blocks := map[string][]byte{}
	require.NoError(t, Read(bytes.NewReader(dst.Bytes()), func(h Header, block io.Reader) error {
		b, err := io.ReadAll(block)
		blocks[h.ID] = b
		assert.Equal(t, Digest(b), h.Get("WARC-Block-Digest"), h.ID)
		return err
	}))
	for _, h := range hs {
		assert.Equal(t, "WARC/1.1", h.Version, h.ID)
		assert.False(t, strings.HasPrefix(h.Get("WARC-Target-URI"), "<"), "%s: %s", h.ID, h.Get("WARC-Target-URI"))
	}
	assert.Equal(t, resp, blocks["<urn:uuid:resp>"], "the block as it was")
	assert.Equal(t, "2026-11-26T11:00:00Z", hs[1].Get("WARC-Date"))
	assert.Equal(t, "revisit", hs[2].Type)
	assert.Equal(t, RevisitProfile, hs[2].Get("WARC-Profile"))
	assert.Equal(t, "http://b.test/img.png", hs[2].Get("WARC-Target-URI"))
	assert.Equal(t, "<urn:uuid:first>", hs[2].Get("WARC-Refers-To"))
	o, ok := idx.Lookup(Digest(body))
	require.True(t, ok, "the upgraded response is indexed")
	assert.Equal(t, Original{TargetURI: "http://b.test/", Date: "2026-11-26T11:00:00Z", ID: "<urn:uuid:resp>"}, o)
}

// Two pages scanned before either is written (ScanAppend outside the
// writer's lock) still store a payload once: the revisit is decided when
// each is written, against what the index has then.
func TestScannedFilesDecideTheirRevisitsWhenWritten(t *testing.T) {
	img := randomBytes(20_000)
	a, b := newPageWARC(t, Software()), newPageWARC(t, Software())
	_, first := a.fetch(t, "http://a.test/img.png", img, nil)
	_, second := b.fetch(t, "http://a.test/img.png?v=2", img, nil)
	sa := ScanAppend(bytes.NewReader(a.buf.Bytes()), int64(a.buf.Len()))
	sb := ScanAppend(bytes.NewReader(b.buf.Bytes()), int64(b.buf.Len()))
	assert.Equal(t, int64(b.buf.Len()), sb.Size())

	var dst bytes.Buffer
	idx := NewDigests()
	stb, err := sb.Write(&dst, idx)
	require.NoError(t, err)
	assert.Zero(t, stb.Revisits, "written first: stored")
	sta, err := sa.Write(&dst, idx)
	require.NoError(t, err)
	assert.Equal(t, 1, sta.Revisits, "written second: a revisit of b's")
	_, hs := members(t, dst.Bytes())
	types := map[string]string{}
	for _, h := range hs {
		types[h.ID] = h.Type
		if h.ID == first {
			assert.Equal(t, second, h.Get("WARC-Refers-To"))
		}
	}
	assert.Equal(t, "response", types[second])
	assert.Equal(t, "revisit", types[first])
}
