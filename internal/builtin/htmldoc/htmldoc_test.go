package htmldoc

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

const page = `<!DOCTYPE html><html><head><meta charset="utf-8">
<title>  Größe
 日本語 </title>
<base href="/docs/">
<link rel="stylesheet" href="s.css"><link rel="Shortcut Icon" href="/fav.ico"><link rel="apple-touch-icon" href="touch.png">
<style>p{color:red}</style></head>
<body><h1>Head line</h1><p>First <b>bold</b> para.</p><script>var hidden = 1;</script>
<div>Second<br>line</div><noscript>no script</noscript>
<a href="a.html#top">A</a> <a href="a.html">A again</a> <a href="#local">skip</a>
<a href="mailto:x@y">mail</a> <a href="javascript:void(0)">js</a> <a href="  https://other.example/x?y=1 ">other</a>
<area href="/map"><iframe src="frame.html"></iframe>
</body></html>`

func parse(t *testing.T, body, ctype string) *Doc {
	t.Helper()
	d, err := Parse([]byte(body), ctype, "http://example.org/start/page.html")
	require.NoError(t, err)
	return d
}

func TestTitle(t *testing.T) {
	tests := []struct{ name, body, want string }{
		{"title normalised", page, "Größe 日本語"},
		{"h1 fallback", "<html><body><h1> Only\nheading </h1></body></html>", "Only heading"},
		{"none", "<html><body><p>x</p></body></html>", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			assert.Equal(t, tt.want, parse(t, tt.body, "text/html").Title())
		})
	}
}

func TestLinks(t *testing.T) {
	var urls []string
	for _, l := range parse(t, page, "text/html").Links() {
		urls = append(urls, l.URL)
	}
	assert.Equal(t, []string{
		"http://example.org/docs/a.html",     // <base> applies, fragment dropped, deduplicated
		"https://other.example/x?y=1",        // trimmed
		"http://example.org/map",             // area
		"http://example.org/docs/frame.html", // iframe
	}, urls)
}

func TestIcons(t *testing.T) {
	assert.Equal(t, []string{"http://example.org/fav.ico", "http://example.org/docs/touch.png"},
		parse(t, page, "text/html").Icons())
}

func TestText(t *testing.T) {
	assert.Equal(t, "Head line\nFirst bold para.\nSecond\nline\nA A again skip mail js other\n",
		parse(t, page, "text/html").Text())
}

func TestCharsetDecoding(t *testing.T) {
	latin1 := "<html><head><title>caf\xe9</title></head><body>na\xefve</body></html>"
	tests := []struct{ name, body, ctype string }{
		{"from content-type", latin1, "text/html; charset=iso-8859-1"},
		{"from meta", `<meta charset="iso-8859-1">` + latin1, "text/html"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := parse(t, tt.body, tt.ctype)
			assert.Equal(t, "café", d.Title())
			assert.Equal(t, "naïve\n", d.Text())
		})
	}
}

func TestParseRejectsBadPageURL(t *testing.T) {
	_, err := Parse([]byte("<p>x"), "text/html", "http://[::1")
	require.Error(t, err)
	assert.Contains(t, err.Error(), `parse page url "http://[::1"`)
}

func TestRequisites(t *testing.T) {
	page := `<html><head><link rel="stylesheet" href="/s.css"><link rel="alternate" href="/feed">
<link rel="Shortcut Icon" href="fav.ico"><script src="https://cdn.example/a.js"></script></head>
<body><img src="/i.png"><img src="/i.png#x"><img src=""><input type="image" src="b.png"><input src="no.png">
<video src="v.mp4"><source src="v.webm"></video><object data="o.swf"></object><a href="/page">page</a>
<img src="data:image/png;base64,AAAA"></body></html>`
	d, err := Parse([]byte(page), "text/html", "http://example.com/dir/index.html")
	require.NoError(t, err)
	assert.Equal(t, []string{"http://example.com/s.css", "http://example.com/dir/fav.ico", "https://cdn.example/a.js",
		"http://example.com/i.png", "http://example.com/dir/b.png", "http://example.com/dir/v.mp4",
		"http://example.com/dir/v.webm", "http://example.com/dir/o.swf"}, d.Requisites())
}
