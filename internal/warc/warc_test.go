package warc

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"io"
	"net/textproto"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// readAll reads every record of a (possibly concatenated) .warc.gz.
func readAll(t *testing.T, data []byte) []map[string]string {
	t.Helper()
	zr, err := gzip.NewReader(bytes.NewReader(data))
	require.NoError(t, err)
	br := bufio.NewReader(zr)
	var out []map[string]string
	for {
		line, err := br.ReadString('\n')
		if err == io.EOF {
			return out
		}
		require.NoError(t, err)
		require.Equal(t, Version+"\r\n", line)
		tp := textproto.NewReader(br)
		h, err := tp.ReadMIMEHeader()
		require.NoError(t, err)
		n, err := strconv.Atoi(h.Get("Content-Length"))
		require.NoError(t, err)
		block := make([]byte, n+4)
		_, err = io.ReadFull(br, block)
		require.NoError(t, err)
		require.Equal(t, "\r\n\r\n", string(block[n:]))
		rec := map[string]string{"block": string(block[:n])}
		for k := range h {
			rec[k] = h.Get(k)
		}
		out = append(out, rec)
	}
}

func TestRecordsConcatenate(t *testing.T) {
	var a, b bytes.Buffer
	wa := NewWriter(&a)
	_, err := wa.Info("page.warc.gz", map[string]string{"software": "archiveflow"})
	require.NoError(t, err)
	reqID, err := wa.Write(Record{Type: "request", TargetURI: "http://x/", ContentType: "application/http;msgtype=request",
		Block: []byte("GET / HTTP/1.1\r\nHost: x\r\n\r\n")})
	require.NoError(t, err)
	wb := NewWriter(&b)
	_, err = wb.Write(Record{Type: "response", TargetURI: "http://x/", Date: time.Unix(0, 0),
		ContentType: "application/http;msgtype=response", Headers: map[string]string{"WARC-Concurrent-To": reqID},
		Block: []byte("HTTP/1.1 200 OK\r\n\r\nhello")})
	require.NoError(t, err)
	assert.Equal(t, int64(a.Len()), wa.Written())

	recs := readAll(t, append(a.Bytes(), b.Bytes()...))
	require.Len(t, recs, 3)
	assert.Equal(t, "warcinfo", recs[0]["Warc-Type"])
	assert.Equal(t, "page.warc.gz", recs[0]["Warc-Filename"])
	assert.Equal(t, "request", recs[1]["Warc-Type"])
	assert.Equal(t, reqID, recs[2]["Warc-Concurrent-To"])
	assert.Equal(t, "1970-01-01T00:00:00.000000Z", recs[2]["Warc-Date"])
	assert.Equal(t, Digest([]byte("HTTP/1.1 200 OK\r\n\r\nhello")), recs[2]["Warc-Block-Digest"])
	assert.True(t, strings.HasPrefix(recs[2]["Warc-Record-Id"], "<urn:uuid:"))
	_, err = wa.Write(Record{Type: "response", Headers: map[string]string{"X": "a\r\nb"}})
	assert.ErrorContains(t, err, "line breaks")
}
