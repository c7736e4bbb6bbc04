// Package sitemap owns reading a site's sitemaps (issue 28 scope 4,
// sitemaps.org 0.9): one file (Parse: XML urlset or sitemapindex, gzip
// recognised by its magic bytes, at most Limits.MaxBytes once
// decompressed), and a crawl's walk through them (Walk: from the start
// sitemaps through every index, each file once, at most Limits.MaxFiles
// files and Limits.MaxURLs URLs). A file that cannot be read is a Problem
// and the walk goes on: a malformed sitemap is reported, never fatal.
//
// The package does no I/O of its own: the caller fetches (internal/engine,
// through the fetch policy, recorded into the crawl's WARC).
package sitemap

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/xml"
	"errors"
	"fmt"
	"io"
	"net/url"
	"strings"
)

// Limits bound a crawl's sitemaps (config crawl.sitemaps).
type Limits struct {
	// MaxBytes is the most one sitemap file may hold once decompressed
	// (sitemaps.org: 50 MiB).
	MaxBytes int64 `json:"max_bytes"`
	// MaxURLs is the most page URLs taken from all of a crawl's sitemaps.
	MaxURLs int `json:"max_urls"`
	// MaxFiles is the most sitemap files fetched (indexes included).
	MaxFiles int `json:"max_files"`
}

// Validate checks that every limit is positive.
func (l Limits) Validate() error {
	if l.MaxBytes < 1 || l.MaxURLs < 1 || l.MaxFiles < 1 {
		return fmt.Errorf("sitemap limits: max_bytes %d, max_urls %d, max_files %d: each must be >= 1", l.MaxBytes, l.MaxURLs, l.MaxFiles)
	}
	return nil
}

// ErrTooLarge marks a file over Limits.MaxBytes (compressed or not).
var ErrTooLarge = errors.New("sitemap larger than the limit")

// Doc is one sitemap file: the page URLs of a urlset, or the sitemap URLs
// of a sitemap index.
type Doc struct {
	URLs     []string
	Sitemaps []string
}

// Parse reads one sitemap file: gzip when it starts with gzip's magic
// bytes, then an XML <urlset> (its <url><loc>s) or <sitemapindex> (its
// <sitemap><loc>s). Anything else, or XML that does not parse, is an
// error; so is a file over maxBytes once decompressed (ErrTooLarge).
func Parse(data []byte, maxBytes int64) (Doc, error) {
	var r io.Reader = bytes.NewReader(data)
	if len(data) >= 2 && data[0] == 0x1f && data[1] == 0x8b {
		zr, err := gzip.NewReader(r)
		if err != nil {
			return Doc{}, fmt.Errorf("gzip: %w", err)
		}
		defer zr.Close()
		r = zr
	}
	plain, err := io.ReadAll(io.LimitReader(r, maxBytes+1))
	if err != nil {
		return Doc{}, fmt.Errorf("gzip: %w", err)
	}
	if int64(len(plain)) > maxBytes {
		return Doc{}, fmt.Errorf("%w: more than %d bytes", ErrTooLarge, maxBytes)
	}
	dec := xml.NewDecoder(bytes.NewReader(plain))
	dec.Strict = true
	var doc Doc
	root, parent := "", ""
	for {
		tok, err := dec.Token()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return Doc{}, fmt.Errorf("xml: %w", err)
		}
		se, ok := tok.(xml.StartElement)
		if !ok {
			continue
		}
		switch name := se.Name.Local; {
		case root == "":
			if name != "urlset" && name != "sitemapindex" {
				return Doc{}, fmt.Errorf("root element <%s>: must be <urlset> or <sitemapindex>", name)
			}
			root = name
		case name == "url" || name == "sitemap":
			parent = name
		case name == "loc":
			var loc string
			if err := dec.DecodeElement(&loc, &se); err != nil {
				return Doc{}, fmt.Errorf("xml: %w", err)
			}
			loc = strings.TrimSpace(loc)
			switch {
			case loc == "":
			case root == "urlset" && parent == "url":
				doc.URLs = append(doc.URLs, loc)
			case root == "sitemapindex" && parent == "sitemap":
				doc.Sitemaps = append(doc.Sitemaps, loc)
			}
		}
	}
	if root == "" {
		return Doc{}, errors.New("no XML element: not a sitemap")
	}
	return doc, nil
}

// Fetch gets one sitemap file's bytes (at most limit bytes read; more is
// ErrTooLarge) or says why not.
type Fetch func(ctx context.Context, url string, limit int64) ([]byte, error)

// Problem is a sitemap file that gave nothing: not fetched, not a sitemap,
// too large.
type Problem struct {
	URL string
	Err error
}

// Result is what a walk found.
type Result struct {
	// URLs are the page URLs, each once, in the order found.
	URLs []string
	// Files is how many sitemap files were fetched.
	Files    int
	Problems []Problem
	// Cuts say what a limit left out.
	Cuts []string
}

// Resolve is ref, a sitemap's or a page's URL as a file names it (a
// robots.txt Sitemap line, a sitemap's <loc>), resolved against that
// file's URL base. sitemaps.org asks for absolute URLs, and absolute ones
// are kept as written; a relative one (`Sitemap: /sitemap.xml`, which
// sites write) means what it would in a browser. A ref that does not
// parse is kept: its fetch, or the crawl's scope, says what is wrong.
func Resolve(base, ref string) string {
	r, err := url.Parse(ref)
	if err != nil || r.IsAbs() {
		return ref
	}
	b, err := url.Parse(base)
	if err != nil {
		return ref
	}
	return b.ResolveReference(r).String()
}

// Walk reads the sitemaps at starts and every sitemap an index among them
// names, breadth first, each URL once, within lim; the URLs a file names
// are resolved against its URL (Resolve).
func Walk(ctx context.Context, starts []string, fetch Fetch, lim Limits) Result {
	var res Result
	queue := append([]string(nil), starts...)
	seenFile := map[string]bool{}
	seenURL := map[string]bool{}
	for i := 0; i < len(queue); i++ {
		u := queue[i]
		if seenFile[u] {
			continue
		}
		seenFile[u] = true
		if res.Files == lim.MaxFiles {
			res.Cuts = append(res.Cuts, fmt.Sprintf("sitemaps: %s and the other sitemaps after it not read: more than %d sitemap files (crawl.sitemaps.max_files)", u, lim.MaxFiles))
			return res
		}
		if ctx.Err() != nil {
			res.Problems = append(res.Problems, Problem{URL: u, Err: ctx.Err()})
			return res
		}
		res.Files++
		data, err := fetch(ctx, u, lim.MaxBytes)
		if err == nil {
			var doc Doc
			doc, err = Parse(data, lim.MaxBytes)
			if err == nil {
				for _, s := range doc.Sitemaps {
					queue = append(queue, Resolve(u, s))
				}
				for j, p := range doc.URLs {
					p = Resolve(u, p)
					if seenURL[p] {
						continue
					}
					if len(res.URLs) == lim.MaxURLs {
						res.Cuts = append(res.Cuts, fmt.Sprintf("sitemaps: %d URLs of %s and any further sitemaps not taken: more than %d URLs (crawl.sitemaps.max_urls)", len(doc.URLs)-j, u, lim.MaxURLs))
						return res
					}
					seenURL[p] = true
					res.URLs = append(res.URLs, p)
				}
				continue
			}
		}
		res.Problems = append(res.Problems, Problem{URL: u, Err: err})
	}
	return res
}
