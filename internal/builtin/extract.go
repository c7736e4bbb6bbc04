package builtin

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"mime"
	"net/url"
	"os"
	"path"
	"path/filepath"
	"strings"

	"go.uber.org/zap"

	"github.com/archiveflow/archiveflow/internal/builtin/hookio"
	"github.com/archiveflow/archiveflow/internal/builtin/htmldoc"
	"github.com/archiveflow/archiveflow/internal/model"
)

// Output files of the parsing hooks.
const (
	titleFile      = "title.txt"
	outlinksFile   = "urls.jsonl"
	htmlToTextFile = "htmltotext.txt"
)

// maxFaviconBytes caps one favicon download.
const maxFaviconBytes = 5 << 20

func (h *Hook) parsePage(ctx context.Context, sources ...string) (*page, *htmldoc.Doc, error) {
	p, err := h.loadPage(ctx, sources...)
	if err != nil {
		return nil, nil, err
	}
	if fetched, doc := crawlPageOf(ctx, h).parsed(); fetched == p {
		return p, doc, nil // parsed once, by pagefetch
	}
	doc, err := htmldoc.Parse(p.Body, p.ContentType, p.URL)
	if err != nil {
		return nil, nil, err
	}
	return p, doc, nil
}

// sourceJSON is what a parsing hook's output_json says of the page it
// read: its source, and its file when that is on disk (a crawl page's
// pagefetch body kept in memory has none: nameFile).
func sourceJSON(ctx context.Context, h *Hook, p *page) map[string]any {
	out := map[string]any{"source": p.Source, "page_url": p.URL}
	crawlPageOf(ctx, h).nameFile(out, "source_file", filepath.Join(h.SnapDir, p.Path), p.Path)
	return out
}

// runTitle saves the page title (title.txt; on a crawl page inside the
// worker only when a later hook runs as a process: WithCrawlPage, and
// its output_json names the file only when it is on disk). Step 5, after dom: it reads the
// rendered DOM, else the headers hook's body, else fetches the page.
func runTitle(ctx context.Context, h *Hook) (hookio.Result, error) {
	p, doc, err := h.parsePage(ctx, sourceDOM, sourcePageFetch, sourceHeaders, sourceFetch)
	if errors.Is(err, errNoPage) {
		return hookio.Result{Status: model.StatusNoResults, OutputStr: err.Error()}, nil
	}
	if err != nil {
		return hookio.Result{}, fmt.Errorf("title: %w", err)
	}
	title := doc.Title()
	out := sourceJSON(ctx, h, p)
	if title == "" {
		return hookio.Result{Status: model.StatusNoResults, OutputStr: "page has no title", OutputJSON: out}, nil
	}
	// On a crawl page inside the worker title.txt is written only for a
	// hook run as a process (WithCrawlPage): the page's index has the
	// title.
	if err := crawlPageOf(ctx, h).writeFile(filepath.Join(h.Dir, titleFile), []byte(title+"\n"), false); err != nil {
		return hookio.Result{}, fmt.Errorf("save title: %w", err)
	}
	// The snapshot's title (job hash, index, status) comes from this
	// record, as any hook's title does.
	if err := h.Out.Title(h.Inv.SnapshotID, title); err != nil {
		return hookio.Result{}, err
	}
	out["title"] = title
	crawlPageOf(ctx, h).nameFile(out, "file", filepath.Join(h.Dir, titleFile), titleFile)
	return hookio.Result{Status: model.StatusSucceeded, OutputStr: title, OutputJSON: out}, nil
}

// runOutlinks reports every hyperlink of the page as a Snapshot record
// (depth = this page's depth + 1) and keeps the same records in urls.jsonl
// (on a crawl page inside the worker only when a later hook reads it:
// WithCrawlPage).
// wget may still be running in step 7: the rendered DOM is preferred, then
// wget's saved page, then the headers hook's body, then a fetch.
func runOutlinks(ctx context.Context, h *Hook) (hookio.Result, error) {
	p, doc, err := h.parsePage(ctx, sourceDOM, sourceWget, sourcePageFetch, sourceHeaders, sourceFetch)
	if errors.Is(err, errNoPage) {
		return hookio.Result{Status: model.StatusNoResults, OutputStr: err.Error()}, nil
	}
	if err != nil {
		return hookio.Result{}, fmt.Errorf("outlinks: %w", err)
	}
	links := doc.Links()
	depth := h.Inv.Extra.Depth + 1
	var buf bytes.Buffer
	for _, l := range links {
		line, err := json.Marshal(hookio.SnapshotRecord(l.URL, depth))
		if err != nil {
			return hookio.Result{}, fmt.Errorf("encode outlink %q: %w", l.URL, err)
		}
		buf.Write(append(line, '\n'))
	}
	out := sourceJSON(ctx, h, p)
	out["count"] = len(links)
	if len(links) == 0 {
		return hookio.Result{Status: model.StatusNoResults, OutputStr: "no links on the page", OutputJSON: out}, nil
	}
	if err := crawlPageOf(ctx, h).writeFile(filepath.Join(h.Dir, outlinksFile), buf.Bytes(), true); err != nil {
		return hookio.Result{}, err
	}
	for _, l := range links {
		if err := h.Out.Snapshot(l.URL, depth); err != nil {
			return hookio.Result{}, err
		}
	}
	crawlPageOf(ctx, h).nameFile(out, "file", filepath.Join(h.Dir, outlinksFile), outlinksFile)
	return hookio.Result{Status: model.StatusSucceeded, OutputStr: fmt.Sprintf("%d links", len(links)), OutputJSON: out}, nil
}

// runHTMLToText saves the page's visible text (htmltotext.txt), from the
// rendered DOM, else wget's saved page, else the headers hook's body, else a
// fetch.
func runHTMLToText(ctx context.Context, h *Hook) (hookio.Result, error) {
	p, doc, err := h.parsePage(ctx, sourceDOM, sourceWget, sourcePageFetch, sourceHeaders, sourceFetch)
	if errors.Is(err, errNoPage) {
		return hookio.Result{Status: model.StatusNoResults, OutputStr: err.Error()}, nil
	}
	if err != nil {
		return hookio.Result{}, fmt.Errorf("htmltotext: %w", err)
	}
	text := doc.Text()
	out := sourceJSON(ctx, h, p)
	if text == "" {
		return hookio.Result{Status: model.StatusNoResults, OutputStr: "page has no text", OutputJSON: out}, nil
	}
	if err := writeOutput(filepath.Join(h.Dir, htmlToTextFile), []byte(text)); err != nil {
		return hookio.Result{}, fmt.Errorf("save text: %w", err)
	}
	out["file"], out["chars"] = htmlToTextFile, len([]rune(text))
	return hookio.Result{Status: model.StatusSucceeded, OutputStr: fmt.Sprintf("%d characters", len([]rune(text))), OutputJSON: out}, nil
}

// runFavicon downloads the page's declared icon, else /favicon.ico at the
// site root, and saves it as favicon.EXT.
func runFavicon(ctx context.Context, h *Hook) (hookio.Result, error) {
	var candidates []string
	if _, doc, err := h.parsePage(ctx, sourceDOM, sourceHeaders, sourceFetch); err == nil {
		candidates = doc.Icons()
	} else {
		h.Log.Info("no page to read icons from; trying /favicon.ico", zap.Error(err))
	}
	root, err := url.Parse(h.finalURL())
	if err != nil {
		return hookio.Result{}, fmt.Errorf("favicon: parse url: %w", err)
	}
	candidates = append(candidates, root.ResolveReference(&url.URL{Path: "/favicon.ico"}).String())

	var tried []string
	for _, c := range dedupe(candidates) {
		f, err := h.get(ctx, c, maxFaviconBytes)
		if err != nil {
			tried = append(tried, fmt.Sprintf("%s: %v", c, err))
			continue
		}
		ctype := f.Header.Get("Content-Type")
		if f.Status != 200 || len(f.Body) == 0 || strings.HasPrefix(ctype, "text/html") {
			tried = append(tried, fmt.Sprintf("%s: HTTP %d %q, %d bytes", c, f.Status, ctype, len(f.Body)))
			continue
		}
		name := "favicon" + iconExt(ctype, f.FinalURL)
		if err := os.WriteFile(filepath.Join(h.Dir, name), f.Body, 0o644); err != nil {
			return hookio.Result{}, fmt.Errorf("save favicon: %w", err)
		}
		return hookio.Result{Status: model.StatusSucceeded, OutputStr: name, OutputJSON: map[string]any{
			"file": name, "icon_url": f.FinalURL, "content_type": ctype, "bytes": len(f.Body),
		}}, nil
	}
	return hookio.Result{Status: model.StatusNoResults, OutputStr: "no favicon found",
		OutputJSON: map[string]any{"tried": tried}}, nil
}

// iconExt picks the favicon's file extension from its content type, else
// from its URL, else .ico.
func iconExt(contentType, iconURL string) string {
	mt, _, _ := mime.ParseMediaType(contentType)
	switch mt {
	case "image/x-icon", "image/vnd.microsoft.icon":
		return ".ico"
	case "image/png":
		return ".png"
	case "image/svg+xml":
		return ".svg"
	case "image/gif":
		return ".gif"
	case "image/jpeg":
		return ".jpg"
	case "image/webp":
		return ".webp"
	}
	if u, err := url.Parse(iconURL); err == nil {
		switch ext := strings.ToLower(path.Ext(u.Path)); ext {
		case ".ico", ".png", ".svg", ".gif", ".jpg", ".jpeg", ".webp":
			return ext
		}
	}
	return ".ico"
}

func dedupe(in []string) []string {
	seen := map[string]bool{}
	var out []string
	for _, s := range in {
		if !seen[s] {
			seen[s] = true
			out = append(out, s)
		}
	}
	return out
}
