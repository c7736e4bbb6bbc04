package cssurl

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestRefs(t *testing.T) {
	imp := func(u string) Ref { return Ref{URL: u, Import: true} }
	ref := func(u string) Ref { return Ref{URL: u} }
	tests := []struct {
		name string
		css  string
		want []Ref
	}{
		{"url without quotes", `a{background:url(img/a.png)}`, []Ref{ref("img/a.png")}},
		{"url with quotes", `a{background:url("a b.png") ; b: url( 'c.png' )}`, []Ref{ref("a b.png"), ref("c.png")}},
		{"url with spaces inside the parentheses", "a{b:url(  x.png \t\n)}", []Ref{ref("x.png")}},
		{"upper case and escaped url function", `a{b:URL(x.png);c:u\72 l(y.png);d:\75rl("z.png")}`,
			[]Ref{ref("x.png"), ref("y.png"), ref("z.png")}},
		{"escapes in an unquoted url", `a{b:url(a\)b\ c\,d\31 .png)}`, []Ref{ref("a)b c,d1.png")}},
		{"escapes in strings", `a{b:url("q\"uote\\.png");c:url('\41 \000042\000043.png');d:url("\
line.png")}`, []Ref{ref(`q"uote\.png`), ref("ABC.png"), ref("line.png")}},
		{"hex escape of zero, a surrogate, out of range", `a{b:url(\0 \D800 \110000 .png)}`, []Ref{ref("\uFFFD\uFFFD\uFFFD.png")}},
		{"non-ASCII kept", `a{b:url(bild-größe.png);c:url("日本.png")}`, []Ref{ref("bild-größe.png"), ref("日本.png")}},
		{"comments", `/* url(no1.png) */ a{b:/*url(no2.png)*/url(yes.png)/* @import "no3.css"; */}`, []Ref{ref("yes.png")}},
		{"unterminated comment", `a{b:url(yes.png)} /* url(no.png)`, []Ref{ref("yes.png")}},
		{"url( inside a string is text", `a{content:"url(no.png)"; b:'@import "no.css"'}`, nil},
		{"a longer name is another function", `a{b:foo-url(no.png);c:-url(no2.png);d:--url(no3.png);e:urls(no4.png)}`, nil},
		{"a unit or a hash named url", `a{b:12url(no.png);c:#url(no2.png);d:1e3url(no3.png)}`, nil},
		{"@import string and url with media", `@import "a.css";@import 'b.css' screen;@import url(c.css) print, tv;
@import url("d.css") layer(x) supports(display: grid) (min-width: 100px);@IMPORT"e.css";`,
			[]Ref{imp("a.css"), imp("b.css"), imp("c.css"), imp("d.css"), imp("e.css")}},
		{"@import with comments before its url", `@import /* x */ "a.css" /* url(no.png) */;`, []Ref{imp("a.css")}},
		{"only an @import's first url is the sheet", `@import url(a.css) url(b.png);`, []Ref{imp("a.css"), ref("b.png")}},
		{"@font-face src with format and local", `@font-face{font-family:F;src:local("F Regular"),url(f.woff2) format("woff2"),
url("f.woff")format("woff"),url(f.eot?#iefix) format('embedded-opentype')}`,
			[]Ref{ref("f.woff2"), ref("f.woff"), ref("f.eot?#iefix")}},
		{"image-set strings and urls", `a{b:image-set("a.png" 1x, url(b.png) 2x);c:-webkit-image-set('c.png' 1x, "d.avif" type("image/avif"))}`,
			[]Ref{ref("a.png"), ref("b.png"), ref("c.png"), ref("d.avif")}},
		{"several url() in one value", `a{background:url(a.png) no-repeat, url(b.png);cursor:url(c.cur),auto;mask:url(m.svg#m)}`,
			[]Ref{ref("a.png"), ref("b.png"), ref("c.cur"), ref("m.svg#m")}},
		{"@namespace and @document preludes are not fetched", `@namespace svg url(http://www.w3.org/2000/svg);
@-moz-document url-prefix(), url(http://example.com/) { a { b: url(yes.png) } }`, []Ref{ref("yes.png")}},
		{"bad url is skipped, the next one taken", `a{b:url(a b.png);c:url(x"y.png);d:url(ok.png)}`, []Ref{ref("ok.png")}},
		{"bad string ends at the newline", "a{b:url(\"no.png\n);c:url(ok.png)}", []Ref{ref("ok.png")}},
		{"data and fragment urls are refs too (the caller drops them)", `a{b:url(data:image/png;base64,AAAA);c:url(#f)}`,
			[]Ref{ref("data:image/png;base64,AAAA"), ref("#f")}},
		{"unclosed url at the end", `a{b:url(last.png`, []Ref{ref("last.png")}},
		{"style attribute", `background-image: url('/bg.png'); color: red`, []Ref{ref("/bg.png")}},
		{"CDO and CDC", `<!-- a{b:url(x.png)} -->url(y.png)`, []Ref{ref("x.png"), ref("y.png")}},
		{"empty", ``, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			assert.Equal(t, tt.want, Refs(tt.css))
		})
	}
}

func TestDecode(t *testing.T) {
	latin1 := "a{b:url(caf\xe9.png)}"
	tests := []struct {
		name, body, ctype, want string
	}{
		{"utf-8 by default", "a{b:url(café.png)}", "text/css", "a{b:url(café.png)}"},
		{"content-type charset", latin1, "text/css; charset=iso-8859-1", "a{b:url(café.png)}"},
		{"@charset", `@charset "iso-8859-1";` + latin1, "text/css", `@charset "iso-8859-1";a{b:url(café.png)}`},
		{"content-type over @charset", `@charset "utf-8";` + latin1, "text/css;charset=latin1", `@charset "utf-8";a{b:url(café.png)}`},
		{"utf-8 bom over content-type", "\xef\xbb\xbfa{b:url(café.png)}", "text/css; charset=iso-8859-1", "a{b:url(café.png)}"},
		{"utf-16le bom", "\xff\xfea\x00{\x00}\x00", "", "a{}"},
		{"unknown label falls back to utf-8", "a{b:url(café.png)}", "text/css; charset=nope", "a{b:url(café.png)}"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			assert.Equal(t, tt.want, Decode([]byte(tt.body), tt.ctype))
		})
	}
}

// FuzzRefs: any input ends, without a panic, and every ref comes from the
// input's url(), @import or image-set() (a ref is never longer than it).
func FuzzRefs(f *testing.F) {
	for _, s := range []string{`@import url(a.css);`, `a{b:url("x\`, `u\72 l(`, "url(\\\n)", `#\`, `-\`, `@\`, "\x00url(\x00)", `/*`, `'\`} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, css string) {
		for _, r := range Refs(css) {
			if len(r.URL) > 3*len(css) {
				t.Fatalf("ref %q longer than its input %q", r.URL, css)
			}
		}
	})
}
