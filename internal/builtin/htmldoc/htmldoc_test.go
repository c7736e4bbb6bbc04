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
		// None declared: bytes that are not UTF-8 are the standard's default.
		{"undeclared, not utf-8", latin1, "text/html"},
		// None declared: valid UTF-8 is read as UTF-8, as browsers do.
		{"undeclared utf-8", "<html><head><title>café</title></head><body>naïve</body></html>", "text/html"},
		// A declaration wins over what the bytes look like.
		{"declared over utf-8 bytes", "<html><head><title>caf\xc3\xa9</title></head><body>na\xc3\xafve</body></html>", "text/html; charset=utf-8"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := parse(t, tt.body, tt.ctype)
			assert.Equal(t, "café", d.Title())
			assert.Equal(t, "naïve\n", d.Text())
		})
	}
}

// A declared charset is followed even when the bytes are valid UTF-8.
func TestDeclaredCharsetWins(t *testing.T) {
	d := parse(t, "<title>caf\xc3\xa9</title>", "text/html; charset=iso-8859-1")
	assert.Equal(t, "cafÃ©", d.Title())
}

func TestParseRejectsBadPageURL(t *testing.T) {
	_, err := Parse([]byte("<p>x"), "text/html", "http://[::1")
	require.Error(t, err)
	assert.Contains(t, err.Error(), `parse page url "http://[::1"`)
}

func TestRequisites(t *testing.T) {
	sheet := func(u string) Requisite { return Requisite{URL: u, Stylesheet: true} }
	ref := func(u string) Requisite { return Requisite{URL: u} }
	tests := []struct {
		name string
		body string
		want []Requisite
	}{
		{"attributes", `<html><head><link rel="stylesheet" href="/s.css"><link rel="alternate" href="/feed">
<link rel="Shortcut Icon" href="fav.ico"><script src="https://cdn.example/a.js"></script></head>
<body><img src="/i.png"><img src="/i.png#x"><img src=""><input type="image" src="b.png"><input src="no.png">
<video src="v.mp4"><source src="v.webm"></video><object data="o.swf"></object><a href="/page">page</a>
<img src="data:image/png;base64,AAAA"></body></html>`, []Requisite{sheet("http://example.com/s.css"),
			ref("http://example.com/dir/fav.ico"), ref("https://cdn.example/a.js"), ref("http://example.com/i.png"),
			ref("http://example.com/dir/b.png"), ref("http://example.com/dir/v.mp4"), ref("http://example.com/dir/v.webm"),
			ref("http://example.com/dir/o.swf")}},
		{"link relations", `<link rel="icon" href="i.ico"><link rel="apple-touch-icon-precomposed" href="t.png">
<link rel="mask-icon" href="m.svg"><link rel="manifest" href="/app.webmanifest"><link rel="modulepreload" href="m.js">
<link rel="preload" as="font" href="f.woff2" crossorigin><link rel="preload" as="style" href="late.css">
<link rel="preload" as="image" imagesrcset="w1.png 1x, w2.png 2x"><link rel="alternate stylesheet" href="alt.css">
<link rel="prefetch" href="next.html"><link rel="canonical" href="/c">`, []Requisite{
			ref("http://example.com/dir/i.ico"), ref("http://example.com/dir/t.png"), ref("http://example.com/dir/m.svg"),
			ref("http://example.com/app.webmanifest"), ref("http://example.com/dir/m.js"), ref("http://example.com/dir/f.woff2"),
			sheet("http://example.com/dir/late.css"), ref("http://example.com/dir/w1.png"), ref("http://example.com/dir/w2.png"),
			sheet("http://example.com/dir/alt.css")}},
		{"srcset, picture, poster, media", `<img src="a.png" srcset="a-1x.png 1x, /b,2.png 2x,c.png 300w">
<picture><source type="image/avif" srcset="p.avif 1x, p2.avif 2x" media="(min-width: 600px)"><source srcset="p.webp"><img src="p.png"></picture>
<video poster="poster.jpg" src="v.mp4"><track src="subs.vtt"></video><audio src="a.mp3"><source src="a.ogg"></audio>
<embed src="e.swf">`, []Requisite{ref("http://example.com/dir/a.png"), ref("http://example.com/dir/a-1x.png"),
			ref("http://example.com/b,2.png"), ref("http://example.com/dir/c.png"), ref("http://example.com/dir/p.avif"),
			ref("http://example.com/dir/p2.avif"), ref("http://example.com/dir/p.webp"), ref("http://example.com/dir/p.png"),
			ref("http://example.com/dir/v.mp4"), ref("http://example.com/dir/poster.jpg"), ref("http://example.com/dir/subs.vtt"),
			ref("http://example.com/dir/a.mp3"), ref("http://example.com/dir/a.ogg"), ref("http://example.com/dir/e.swf")}},
		{"style elements and attributes", `<head><base href="/base/"><style>@import "imp.css" screen; body{background:url(bg.png)}
/* url(no.png) */ @font-face{src:url(/f.woff2) format("woff2")} p{b:url(data:image/gif;base64,R0l=)}</style></head>
<body style="background-image:url('body.png')"><div style="background: url(&quot;q.png&quot;) , url(r.png)"></div>
<p style="color:red">x</p><svg><style>rect{fill:url(#grad)} g{filter:url(f.svg#x)}</style></svg></body>`, []Requisite{
			sheet("http://example.com/base/imp.css"), ref("http://example.com/base/bg.png"), ref("http://example.com/f.woff2"),
			ref("http://example.com/base/body.png"), ref("http://example.com/base/q.png"), ref("http://example.com/base/r.png"),
			ref("http://example.com/base/f.svg")}},
		{"an image also imported as a sheet is a sheet", `<img src="x.css"><style>@import url(x.css);</style>`,
			[]Requisite{sheet("http://example.com/dir/x.css")}},
		{"background attributes and SVG", `<body background="bg.gif"><table background="t.gif"><tr><td background="td.gif">
<th background="th.gif"></table><svg><image href="svg.png"/><image xlink:href="x.png"/><use href="sprite.svg#i"/></svg>`,
			[]Requisite{ref("http://example.com/dir/bg.gif"), ref("http://example.com/dir/t.gif"), ref("http://example.com/dir/td.gif"),
				ref("http://example.com/dir/th.gif"), ref("http://example.com/dir/svg.png"), ref("http://example.com/dir/x.png"),
				ref("http://example.com/dir/sprite.svg")}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d, err := Parse([]byte(tt.body), "text/html", "http://example.com/dir/index.html")
			require.NoError(t, err)
			assert.Equal(t, tt.want, d.Requisites())
		})
	}
}

func TestSrcsetURLs(t *testing.T) {
	tests := []struct {
		srcset string
		want   []string
	}{
		{"a.png", []string{"a.png"}},
		{"a.png 1x, b.png 2x", []string{"a.png", "b.png"}},
		{"a.png 100w,b.png 200w", []string{"a.png", "b.png"}},
		{"  a.png  ,  b.png 1.5x  ", []string{"a.png", "b.png"}},
		{"a.png,b.png", []string{"a.png,b.png"}},                                   // a comma inside a URL is kept
		{"a.png, b.png", []string{"a.png", "b.png"}},                               // trailing commas end a candidate
		{"img,1.jpg 1x, img,2.jpg 2x", []string{"img,1.jpg", "img,2.jpg"}},         // commas in URLs with descriptors
		{"/x?w=1,h=2 100w, /y?w=3,h=4 200w", []string{"/x?w=1,h=2", "/y?w=3,h=4"}}, // query strings with commas
		{"a.png (future, descriptor) 1x, b.png", []string{"a.png", "b.png"}},       // a comma inside parentheses is not a split
		{"a.png,,, b.png", []string{"a.png", "b.png"}},                             // several trailing commas
		{", ,a.png", []string{"a.png"}},                                            // leading commas skipped
		{"data:image/png;base64,AA== 1x, b.png 2x", []string{"data:image/png;base64,AA==", "b.png"}},
		{"", nil},
	}
	for _, tt := range tests {
		assert.Equal(t, tt.want, srcsetURLs(tt.srcset), tt.srcset)
	}
}
