// Package htmldoc owns what the built-in hooks read out of an HTML page: its
// title, its outgoing links, its requisites (the CSS in it read through
// cssurl), its icons and its visible text. Input bytes are decoded to UTF-8
// from the charset of the Content-Type or the page's own <meta> declaration
// (a page that declares none: UTF-8 when it is valid UTF-8, else
// windows-1252) before parsing.
package htmldoc

import (
	"bytes"
	"fmt"
	"io"
	"net/url"
	"slices"
	"strings"
	"unicode/utf8"

	"golang.org/x/net/html"
	"golang.org/x/net/html/atom"
	"golang.org/x/net/html/charset"
	"golang.org/x/text/transform"

	"github.com/archiveflow/archiveflow/internal/cssurl"
)

// Doc is a parsed HTML page.
type Doc struct {
	root *html.Node
	base *url.URL // the page URL, or its <base href> when present
}

// Parse decodes body (in the charset named by contentType or sniffed from the
// page) and parses it; pageURL resolves relative links.
func Parse(body []byte, contentType, pageURL string) (*Doc, error) {
	base, err := url.Parse(pageURL)
	if err != nil {
		return nil, fmt.Errorf("parse page url %q: %w", pageURL, err)
	}
	root, err := html.Parse(decode(body, contentType))
	if err != nil {
		return nil, fmt.Errorf("parse html of %s: %w", pageURL, err)
	}
	d := &Doc{root: root, base: base}
	if href := d.first(atom.Base, "href"); href != "" {
		if b, err := base.Parse(href); err == nil {
			d.base = b
		}
	}
	return d, nil
}

// decode reads body in the charset its Content-Type, BOM or <meta> names.
// A page that names none is read as UTF-8 when its bytes are valid UTF-8,
// as browsers' detectors read it, and in the HTML standard's default
// (windows-1252) otherwise.
func decode(body []byte, contentType string) io.Reader {
	e, _, certain := charset.DetermineEncoding(body, contentType)
	if !certain && utf8.Valid(body) {
		return bytes.NewReader(body)
	}
	return transform.NewReader(bytes.NewReader(body), e.NewDecoder())
}

// Title returns the whitespace-normalised text of the first <title>, or of
// the first <h1> when there is no title, or "".
func (d *Doc) Title() string {
	for _, a := range []atom.Atom{atom.Title, atom.H1} {
		if n := find(d.root, a); n != nil {
			if t := normalise(textOf(n)); t != "" {
				return t
			}
		}
	}
	return ""
}

// Link is one outgoing link of the page.
type Link struct {
	URL  string `json:"url"`
	Text string `json:"text,omitempty"`
	Tag  string `json:"tag"`
}

// Links returns the page's hyperlinks (a, area, iframe, frame) as absolute
// http(s) URLs without fragment, deduplicated, in document order.
func (d *Doc) Links() []Link {
	var links []Link
	seen := map[string]bool{}
	walk(d.root, func(n *html.Node) {
		attr := ""
		switch n.DataAtom {
		case atom.A, atom.Area:
			attr = "href"
		case atom.Iframe, atom.Frame:
			attr = "src"
		default:
			return
		}
		u := d.Resolve(attrOf(n, attr))
		if u == "" || seen[u] {
			return
		}
		seen[u] = true
		links = append(links, Link{URL: u, Text: normalise(textOf(n)), Tag: n.Data})
	})
	return links
}

// Requisite is one URL the page needs to render.
type Requisite struct {
	URL string
	// Stylesheet: referred to as a stylesheet (link rel=stylesheet, a
	// preload as=style), so its fetcher reads it as CSS for what it refers
	// to in turn, whatever its Content-Type.
	Stylesheet bool
}

// Requisites returns what the page needs to render, as absolute http(s)
// URLs without fragment, deduplicated, in document order: link rel
// stylesheet, icon (shortcut icon, apple-touch-icon, mask-icon), manifest,
// preload (href and imagesrcset) and modulepreload; images (img src and
// every srcset candidate, input type=image, picture's source srcset, SVG
// image and use href, the background attribute of body, table, td, th);
// scripts; media (video src and poster, audio, source, track, embed) and
// object data; and what CSS in <style> elements and style attributes
// refers to (cssurl: @import, url(), image-set()), resolved against the
// page's base. What a stylesheet refers to is its fetcher's to read.
func (d *Doc) Requisites() []Requisite {
	var out []Requisite
	at := map[string]int{}
	add := func(ref string, sheet bool) {
		u := d.Resolve(ref)
		if u == "" {
			return
		}
		if i, ok := at[u]; ok {
			out[i].Stylesheet = out[i].Stylesheet || sheet
			return
		}
		at[u] = len(out)
		out = append(out, Requisite{URL: u, Stylesheet: sheet})
	}
	addSrcset := func(n *html.Node, key string) {
		for _, u := range srcsetURLs(attrOf(n, key)) {
			add(u, false)
		}
	}
	addCSS := func(css string) {
		for _, r := range cssurl.Refs(css) {
			add(r.URL, r.Import)
		}
	}
	walk(d.root, func(n *html.Node) {
		if s := attrOf(n, "style"); s != "" {
			addCSS(s)
		}
		if n.Namespace == "svg" {
			switch n.Data {
			case "image", "use", "feImage":
				href := attrOf(n, "href")
				if href == "" {
					href = attrNS(n, "xlink", "href")
				}
				add(href, false)
			case "style":
				addCSS(textOf(n))
			}
			return
		}
		switch n.DataAtom {
		case atom.Link:
			rels := strings.Fields(strings.ToLower(attrOf(n, "rel")))
			switch as := strings.ToLower(strings.TrimSpace(attrOf(n, "as"))); {
			case slices.Contains(rels, "stylesheet"):
				add(attrOf(n, "href"), true)
			case slices.Contains(rels, "preload"):
				add(attrOf(n, "href"), as == "style")
				addSrcset(n, "imagesrcset")
			case slices.ContainsFunc(rels, requisiteRel):
				add(attrOf(n, "href"), false)
			}
		case atom.Style:
			addCSS(textOf(n))
		case atom.Img, atom.Source:
			add(attrOf(n, "src"), false)
			addSrcset(n, "srcset")
		case atom.Video:
			add(attrOf(n, "src"), false)
			add(attrOf(n, "poster"), false)
		case atom.Script, atom.Embed, atom.Audio, atom.Track:
			add(attrOf(n, "src"), false)
		case atom.Input:
			if strings.EqualFold(attrOf(n, "type"), "image") {
				add(attrOf(n, "src"), false)
			}
		case atom.Object:
			add(attrOf(n, "data"), false)
		case atom.Body, atom.Table, atom.Td, atom.Th:
			add(attrOf(n, "background"), false)
		}
	})
	return out
}

// requisiteRel: a link relation whose target the page loads as it
// renders (stylesheet and preload are told apart before).
func requisiteRel(rel string) bool {
	switch rel {
	case "icon", "apple-touch-icon", "apple-touch-icon-precomposed", "mask-icon", "manifest", "modulepreload":
		return true
	}
	return false
}

// Icons returns the absolute URLs of the page's declared icons (link rel
// icon, shortcut icon, apple-touch-icon), in document order.
func (d *Doc) Icons() []string {
	var icons []string
	walk(d.root, func(n *html.Node) {
		if n.DataAtom != atom.Link {
			return
		}
		for _, rel := range strings.Fields(strings.ToLower(attrOf(n, "rel"))) {
			if rel == "icon" || rel == "apple-touch-icon" {
				if u := d.Resolve(attrOf(n, "href")); u != "" {
					icons = append(icons, u)
				}
				return
			}
		}
	})
	return icons
}

// Resolve makes ref absolute against the page's base and returns it without
// fragment, or "" when it is empty, unparsable or not http(s).
func (d *Doc) Resolve(ref string) string {
	return ResolveAgainst(d.base, ref)
}

// ResolveAgainst makes ref absolute against base and returns it without
// fragment, or "" when it is empty, a fragment alone (in CSS, url(#id)
// names an element of the document), unparsable or not http(s) (data:
// among them). A stylesheet's references resolve against its own URL.
func ResolveAgainst(base *url.URL, ref string) string {
	ref = strings.TrimSpace(ref)
	if ref == "" || strings.HasPrefix(ref, "#") {
		return ""
	}
	u, err := base.Parse(ref)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return ""
	}
	u.Fragment = ""
	u.RawFragment = ""
	return u.String()
}

// Text returns the page's visible text: script, style, noscript, template
// and head content are dropped, block elements break lines, runs of spaces
// collapse, and blank lines are removed.
func (d *Doc) Text() string {
	var b strings.Builder
	body := find(d.root, atom.Body)
	if body == nil {
		body = d.root
	}
	writeText(&b, body)
	var lines []string
	for _, l := range strings.Split(b.String(), "\n") {
		if l = normalise(l); l != "" {
			lines = append(lines, l)
		}
	}
	if len(lines) == 0 {
		return ""
	}
	return strings.Join(lines, "\n") + "\n"
}

var hidden = map[atom.Atom]bool{
	atom.Script: true, atom.Style: true, atom.Noscript: true, atom.Template: true,
	atom.Head: true, atom.Svg: true, atom.Iframe: true, atom.Object: true,
}

var block = map[atom.Atom]bool{
	atom.P: true, atom.Div: true, atom.Br: true, atom.Li: true, atom.Tr: true,
	atom.H1: true, atom.H2: true, atom.H3: true, atom.H4: true, atom.H5: true,
	atom.H6: true, atom.Section: true, atom.Article: true, atom.Header: true,
	atom.Footer: true, atom.Nav: true, atom.Ul: true, atom.Ol: true,
	atom.Table: true, atom.Blockquote: true, atom.Pre: true, atom.Hr: true,
	atom.Main: true, atom.Aside: true, atom.Dt: true, atom.Dd: true,
	atom.Figcaption: true, atom.Title: true,
}

var lineBreaks = strings.NewReplacer("\r\n", " ", "\n", " ", "\r", " ")

func writeText(w io.StringWriter, n *html.Node) {
	switch n.Type {
	case html.TextNode:
		// Source line breaks are spaces; only block elements break lines.
		_, _ = w.WriteString(lineBreaks.Replace(n.Data))
		return
	case html.ElementNode:
		if hidden[n.DataAtom] {
			return
		}
	case html.CommentNode:
		return
	}
	if block[n.DataAtom] {
		_, _ = w.WriteString("\n")
	}
	for c := n.FirstChild; c != nil; c = c.NextSibling {
		writeText(w, c)
	}
	if block[n.DataAtom] {
		_, _ = w.WriteString("\n")
	}
}

func (d *Doc) first(a atom.Atom, attr string) string {
	if n := find(d.root, a); n != nil {
		return attrOf(n, attr)
	}
	return ""
}

func find(n *html.Node, a atom.Atom) *html.Node {
	if n.Type == html.ElementNode && n.DataAtom == a {
		return n
	}
	for c := n.FirstChild; c != nil; c = c.NextSibling {
		if f := find(c, a); f != nil {
			return f
		}
	}
	return nil
}

func walk(n *html.Node, fn func(*html.Node)) {
	if n.Type == html.ElementNode {
		fn(n)
	}
	for c := n.FirstChild; c != nil; c = c.NextSibling {
		walk(c, fn)
	}
}

func attrOf(n *html.Node, key string) string {
	return attrNS(n, "", key)
}

func attrNS(n *html.Node, ns, key string) string {
	for _, a := range n.Attr {
		if a.Namespace == ns && a.Key == key {
			return a.Val
		}
	}
	return ""
}

func textOf(n *html.Node) string {
	var b strings.Builder
	var rec func(*html.Node)
	rec = func(n *html.Node) {
		if n.Type == html.TextNode {
			b.WriteString(n.Data)
		}
		for c := n.FirstChild; c != nil; c = c.NextSibling {
			rec(c)
		}
	}
	rec(n)
	return b.String()
}

func normalise(s string) string {
	return strings.Join(strings.Fields(s), " ")
}
