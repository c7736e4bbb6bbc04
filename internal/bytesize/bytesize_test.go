package bytesize

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestParse(t *testing.T) {
	for in, want := range map[string]int64{
		"0":         0,
		"1048576":   1 << 20,
		"512MiB":    512 << 20,
		"512 mib":   512 << 20,
		" 64MiB ":   64 << 20,
		"1.5GiB":    3 << 29,
		"2GB":       2e9,
		"1kb":       1000,
		"1KiB":      1024,
		"10B":       10,
		"1TiB":      1 << 40,
		"0.5KiB":    512,
		"1.0000001": 1,
	} {
		got, err := Parse(in)
		require.NoError(t, err, in)
		assert.Equal(t, want, got, in)
	}
	for in, msg := range map[string]string{
		"":           "must be a number",
		"MiB":        "must be a number",
		"-1MiB":      "must be a number",
		"512M":       `ambiguous: write 512MiB (powers of 1024) or 512MB`,
		"1g":         "ambiguous",
		"5 parsecs":  "unknown unit",
		"1.2.3MiB":   "is not a number",
		"1e30TiB":    "unknown unit",
		"9999999TiB": "too large",
	} {
		_, err := Parse(in)
		require.Error(t, err, in)
		assert.Contains(t, err.Error(), msg, in)
		assert.Contains(t, err.Error(), in, "the error quotes the value")
	}
}

func TestFormat(t *testing.T) {
	for n, want := range map[int64]string{
		0:         "0 B",
		900:       "900 B",
		1024:      "1 KiB",
		64 << 20:  "64 MiB",
		3 << 29:   "1.5 GiB",
		1<<30 + 1: "1.0 GiB",
		5 << 40:   "5 TiB",
	} {
		assert.Equal(t, want, Format(n), n)
	}
}
