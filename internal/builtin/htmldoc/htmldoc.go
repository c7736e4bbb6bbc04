// Package htmldoc owns what the built-in hooks read out of an HTML page: its
// title, its outgoing links, its icons and its visible text. Input bytes are
// decoded to UTF-8 from the charset of the Content-Type or the page's own
// <meta> declaration before parsing.
package htmldoc

import (
	"bytes"
	"fmt"
	"io"
	"net/url"
	"strings"

	"golang.org/x/net/html"
	"golang.org/x/net/html/atom"
	"golang.org/x/net/html/charset"
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
	r, err := charset.NewReader(bytes.NewReader(body), contentType)
	if err != nil {
		return nil, fmt.Errorf("decode page %s (content-type %q): %w", pageURL, contentType, err)
	}
	root, err := html.Parse(r)
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

// Requisites returns what the page needs to render, as absolute http(s)
// URLs without fragment, deduplicated, in document order: stylesheets and
// icons (link rel), images (img, input type=image), scripts, embedded
// media (embed, source, video, audio, track) and object data.
func (d *Doc) Requisites() []string {
	var out []string
	seen := map[string]bool{}
	add := func(ref string) {
		if u := d.Resolve(ref); u != "" && !seen[u] {
			seen[u] = true
			out = append(out, u)
		}
	}
	walk(d.root, func(n *html.Node) {
		switch n.DataAtom {
		case atom.Link:
			for _, rel := range strings.Fields(strings.ToLower(attrOf(n, "rel"))) {
				if rel == "stylesheet" || rel == "icon" || rel == "apple-touch-icon" {
					add(attrOf(n, "href"))
					return
				}
			}
		case atom.Img, atom.Script, atom.Embed, atom.Source, atom.Video, atom.Audio, atom.Track:
			add(attrOf(n, "src"))
		case atom.Input:
			if strings.EqualFold(attrOf(n, "type"), "image") {
				add(attrOf(n, "src"))
			}
		case atom.Object:
			add(attrOf(n, "data"))
		}
	})
	return out
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
	ref = strings.TrimSpace(ref)
	if ref == "" || strings.HasPrefix(ref, "#") {
		return ""
	}
	u, err := d.base.Parse(ref)
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
	for _, a := range n.Attr {
		if a.Namespace == "" && a.Key == key {
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
