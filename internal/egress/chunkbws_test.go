package egress

import (
	"bufio"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/archiveflow/archiveflow/internal/egress/egresstest"
)

// TestSizeLinesHandsTheClientWhatItReads: whatever the split of the bytes
// received, the client gets them with the whitespace before a chunk
// extension left out of size lines only (not of the head, the data, or
// what follows the answer), and net/http reads the body the origin sent.
func TestSizeLinesHandsTheClientWhatItReads(t *testing.T) {
	interim := "HTTP/1.1 100 Continue\r\n\r\n"
	head := "HTTP/1.1 200 OK\r\nX-Keep: a \t;b\r\nTransfer-Encoding: chunked\r\n\r\n"
	body := "5 \t;ext=1\r\nab ;c\r\n3;x\r\n ;y\r\n0 ;last\r\nX-Sum: 1 ;z\r\n\r\nafter ;it"
	want := "5;ext=1\r\nab ;c\r\n3;x\r\n ;y\r\n0;last\r\nX-Sum: 1 ;z\r\n\r\nafter ;it"
	raw := interim + head + body
	for split := 1; split <= len(raw); split++ {
		s := &sizeLines{method: http.MethodGet}
		var got []byte
		for i := 0; i < len(raw); i += split {
			got = append(got, s.feed([]byte(raw[i:min(i+split, len(raw))]))...)
		}
		got = append(got, s.flush()...)
		require.Equal(t, interim+head+want, string(got), "fed %d bytes at a time", split)
	}

	// Other answers pass as they are: a length-delimited body, a HEAD's.
	for method, a := range map[string]string{
		http.MethodGet:  "HTTP/1.1 200 OK\r\nContent-Length: 4\r\n\r\n1 ;x",
		http.MethodHead: "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n",
	} {
		s := &sizeLines{method: method}
		assert.Equal(t, a, string(append(s.feed([]byte(a)), s.flush()...)), method)
	}

	// net/http reads the answer handed on; its own reader refuses the
	// answer as received.
	a := string(egresstest.UnusualAnswers()[egresstest.PathChunked].Bytes)
	s := &sizeLines{method: http.MethodGet}
	resp, err := http.ReadResponse(bufioReader(string(s.feed([]byte(a)))), nil)
	require.NoError(t, err)
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	assert.Contains(t, string(b), "chunked!")
	resp, err = http.ReadResponse(bufioReader(a), nil)
	require.NoError(t, err)
	_, err = io.ReadAll(resp.Body)
	assert.ErrorContains(t, err, "invalid byte in chunk length", "net/http reads it itself now: sizeLines can go")
}

func bufioReader(s string) *bufio.Reader { return bufio.NewReader(strings.NewReader(s)) }
