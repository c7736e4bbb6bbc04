package urllist

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/archiveflow/archiveflow/config"
)

var lim = Limits{MaxBytes: 1 << 10, MaxURLs: 10}

func TestParseSkipsBlankAndCommentLinesAndReportsBadOnes(t *testing.T) {
	in := "https://a.example/x\n\n   \n# a comment\n  #indented comment\r\nftp://a.example/\nnot a url\nhttp://b.example:80/y#frag\r\nhttp://[::1\nhttps://c.example/last"
	l, err := Parse(strings.NewReader(in), lim)
	require.NoError(t, err)
	assert.Equal(t, []Entry{
		{Line: 1, Text: "https://a.example/x", URL: "https://a.example/x"},
		{Line: 8, Text: "http://b.example:80/y#frag", URL: "http://b.example/y"},
		{Line: 10, Text: "https://c.example/last", URL: "https://c.example/last"},
	}, l.URLs)
	require.Len(t, l.Bad, 3)
	assert.Equal(t, BadLine{Line: 6, Text: "ftp://a.example/", Rule: "must be an http(s) URL"}, l.Bad[0])
	assert.Equal(t, BadLine{Line: 7, Text: "not a url", Rule: "must be one URL (no spaces inside)"}, l.Bad[1])
	assert.Equal(t, 9, l.Bad[2].Line)
	assert.Contains(t, l.Bad[2].Rule, "must be a valid URL")
	assert.Equal(t, `line 6: "ftp://a.example/": must be an http(s) URL`, l.Bad[0].Error())
}

func TestParseEmptyListHasNoURLs(t *testing.T) {
	l, err := Parse(strings.NewReader("\n# only comments\n\n"), lim)
	require.NoError(t, err)
	assert.Empty(t, l.URLs)
	assert.Empty(t, l.Bad)
}

func TestParseRefusesAListOverTheSizeLimit(t *testing.T) {
	in := strings.Repeat("https://a.example/\n", 10) // 190 bytes
	_, err := Parse(strings.NewReader(in), Limits{MaxBytes: 189, MaxURLs: 100})
	require.ErrorIs(t, err, ErrTooLarge)
	assert.Contains(t, err.Error(), "crawl.url_list.max_bytes")
	l, err := Parse(strings.NewReader(in), Limits{MaxBytes: 190, MaxURLs: 100})
	require.NoError(t, err, "exactly at the limit")
	assert.Len(t, l.URLs, 10)
}

func TestParseRefusesAListOverTheCountLimit(t *testing.T) {
	in := "https://a.example/1\n# c\nhttps://a.example/2\nhttps://a.example/3\n"
	_, err := Parse(strings.NewReader(in), Limits{MaxBytes: 1 << 10, MaxURLs: 2})
	require.ErrorIs(t, err, ErrTooMany)
	assert.Contains(t, err.Error(), "line 4")
	assert.Contains(t, err.Error(), "crawl.url_list.max_urls")
	l, err := Parse(strings.NewReader(in), Limits{MaxBytes: 1 << 10, MaxURLs: 3})
	require.NoError(t, err)
	assert.Len(t, l.URLs, 3)
}

func TestParseRefusesBinaryContent(t *testing.T) {
	for name, in := range map[string]string{
		"NUL byte":      "https://a.example/\nab\x00cd\n",
		"invalid UTF-8": "https://a.example/\n\xff\xfe\n",
	} {
		t.Run(name, func(t *testing.T) {
			_, err := Parse(strings.NewReader(in), lim)
			require.ErrorIs(t, err, ErrNotText)
			assert.Contains(t, err.Error(), "line 2")
		})
	}
}

func TestParseRefusesZeroLimits(t *testing.T) {
	_, err := Parse(strings.NewReader("https://a.example/"), Limits{})
	require.Error(t, err)
}

func TestLimitsOfTheDefaultConfiguration(t *testing.T) {
	l := LimitsOf(config.Default().Crawl.URLList)
	assert.Positive(t, l.MaxBytes)
	assert.Positive(t, l.MaxURLs)
}
