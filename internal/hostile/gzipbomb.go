// Package hostile owns pages that attack the archiver rather than serve
// content, for tests: a gzip bomb (GzipBomb), a valid gzip stream of zeros
// that inflates a thousand times over, served with Content-Encoding: gzip.
package hostile

import (
	"bytes"
	"compress/flate"
	"encoding/binary"
	"hash/crc32"
	"io"
	"net/http"
	"strconv"
)

// chunk is the inflated size of one repeated deflate segment.
const chunk = 1 << 20

// GzipBomb is a gzip member of zeros, built from one compressed MiB
// repeated, so a 10 GiB bomb costs ~1 KiB of memory and no compression
// time: deflate output of zeros reaches a steady state in which every MiB
// (ended by a sync flush, which aligns it to a byte) compresses to the same
// bytes. The stream is valid: its trailer holds the CRC-32 and size of the
// inflated data.
type GzipBomb struct {
	first, repeat, tail []byte
	chunks              int64
}

// gzipHeader is a gzip member header: deflate, no name, no time, unknown OS.
var gzipHeader = []byte{0x1f, 0x8b, 8, 0, 0, 0, 0, 0, 0, 255}

// NewGzipBomb returns a bomb that inflates to inflated bytes, rounded up
// to a whole MiB (at least one).
func NewGzipBomb(inflated int64) *GzipBomb {
	chunks := max((inflated+chunk-1)/chunk, 1)
	var buf bytes.Buffer
	w, err := flate.NewWriter(&buf, flate.BestCompression)
	if err != nil {
		panic(err) // the level is valid
	}
	zeros := make([]byte, chunk)
	segment := func() []byte {
		_, _ = w.Write(zeros)
		_ = w.Flush()
		b := bytes.Clone(buf.Bytes())
		buf.Reset()
		return b
	}
	b := &GzipBomb{chunks: chunks}
	b.first = append(bytes.Clone(gzipHeader), segment()...)
	b.repeat = segment()
	if again := segment(); !bytes.Equal(again, b.repeat) {
		panic("hostile: deflate of zeros did not reach a steady state")
	}
	_ = w.Close()
	var crc uint32
	for range chunks {
		crc = crc32.Update(crc, crc32.IEEETable, zeros)
	}
	b.tail = binary.LittleEndian.AppendUint32(bytes.Clone(buf.Bytes()), crc)
	b.tail = binary.LittleEndian.AppendUint32(b.tail, uint32(chunks*chunk)) // ISIZE: the size modulo 2^32
	return b
}

// Inflated is the size of the data the bomb inflates to.
func (b *GzipBomb) Inflated() int64 { return b.chunks * chunk }

// Size is the size of the gzip stream: the bytes on the wire.
func (b *GzipBomb) Size() int64 {
	return int64(len(b.first)) + (b.chunks-1)*int64(len(b.repeat)) + int64(len(b.tail))
}

// WriteTo writes the gzip stream to w.
func (b *GzipBomb) WriteTo(w io.Writer) (int64, error) {
	var n int64
	write := func(p []byte) error {
		m, err := w.Write(p)
		n += int64(m)
		return err
	}
	if err := write(b.first); err != nil {
		return n, err
	}
	for i := int64(1); i < b.chunks; i++ {
		if err := write(b.repeat); err != nil {
			return n, err
		}
	}
	return n, write(b.tail)
}

// ServeHTTP answers every request with the bomb as an HTML page:
// Content-Encoding gzip, whatever the request's Accept-Encoding says, and
// its Content-Length. A client that hangs up ends the answer.
func (b *GzipBomb) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	h := w.Header()
	h.Set("Content-Type", "text/html; charset=utf-8")
	h.Set("Content-Encoding", "gzip")
	h.Set("Content-Length", strconv.FormatInt(b.Size(), 10))
	w.WriteHeader(http.StatusOK)
	if r.Method != http.MethodHead {
		_, _ = b.WriteTo(w)
	}
}
