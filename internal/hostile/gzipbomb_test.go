package hostile

import (
	"bytes"
	"compress/gzip"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestGzipBombIsAValidGzipOfZeros(t *testing.T) {
	b := NewGzipBomb(64<<20 + 1)
	assert.EqualValues(t, 65<<20, b.Inflated(), "rounded up to a whole MiB")
	var stream bytes.Buffer
	n, err := b.WriteTo(&stream)
	require.NoError(t, err)
	assert.Equal(t, b.Size(), n)
	assert.EqualValues(t, stream.Len(), b.Size())
	assert.Less(t, b.Size()*900, b.Inflated(), "inflates more than 900 times over")

	zr, err := gzip.NewReader(&stream)
	require.NoError(t, err)
	zr.Multistream(false)
	buf := make([]byte, 1<<20)
	var inflated int64
	for {
		m, err := zr.Read(buf)
		require.Equal(t, make([]byte, m), buf[:m], "zeros only")
		inflated += int64(m)
		if err == io.EOF {
			break
		}
		require.NoError(t, err, "the CRC-32 and size in the trailer check")
	}
	assert.Equal(t, b.Inflated(), inflated)
}

func TestGzipBombServedAsAnHTMLPage(t *testing.T) {
	b := NewGzipBomb(10 << 30)
	assert.InDelta(t, 10.6e6, float64(b.Size()), 0.5e6, "10 GiB of zeros in ~10 MB on the wire")
	srv := httptest.NewServer(b)
	defer srv.Close()
	req, err := http.NewRequest(http.MethodGet, srv.URL, nil)
	require.NoError(t, err)
	req.Header.Set("Accept-Encoding", "identity") // ignored
	resp, err := http.DefaultTransport.(*http.Transport).RoundTrip(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	assert.Equal(t, "gzip", resp.Header.Get("Content-Encoding"))
	assert.Equal(t, b.Size(), resp.ContentLength)
	head := make([]byte, 2)
	_, err = io.ReadFull(resp.Body, head)
	require.NoError(t, err)
	assert.Equal(t, []byte{0x1f, 0x8b}, head, "the compressed bytes as sent")
}
