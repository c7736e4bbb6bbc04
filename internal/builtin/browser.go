package builtin

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/archiveflow/archiveflow/internal/builtin/chrome"
	"github.com/archiveflow/archiveflow/internal/builtin/hookio"
	"github.com/archiveflow/archiveflow/internal/model"
	"github.com/archiveflow/archiveflow/internal/procs"
)

// Output files of the browser hooks.
const (
	screenshotFile = "screenshot.png"
	pdfFile        = "output.pdf"
	domFile        = "output.html"
)

// chromeGrace is how long Chromium gets between SIGTERM and SIGKILL.
const chromeGrace = 5 * time.Second

var (
	pngMagic = []byte("\x89PNG\r\n\x1a\n")
	pdfMagic = []byte("%PDF-")
)

// capture is what distinguishes the three browser hooks.
type capture struct {
	file     string
	kind     chrome.Kind
	viewport chrome.Viewport
	magic    []byte // the output must start with it (nil: non-empty)
}

func runScreenshot(ctx context.Context, h *Hook) (hookio.Result, error) {
	return runCapture(ctx, h, capture{file: screenshotFile, kind: chrome.Screenshot, magic: pngMagic,
		viewport: chrome.Viewport{Width: 1440, Height: 2000}})
}

func runPDF(ctx context.Context, h *Hook) (hookio.Result, error) {
	return runCapture(ctx, h, capture{file: pdfFile, kind: chrome.PDF, magic: pdfMagic})
}

func runDOM(ctx context.Context, h *Hook) (hookio.Result, error) {
	return runCapture(ctx, h, capture{file: domFile, kind: chrome.DOM})
}

// runCapture runs one headless Chromium capture of the URL into c.file.
// No Chromium: skipped. Chromium failing or exceeding <PLUGIN>_TIMEOUT,
// or the page not loading: transient failure (retried), nothing kept. A
// page answered as a download: noresults, nothing to show. The
// page answered a status model.TransientStatus calls the site unable to
// answer now: transient failure too, the capture of that answer kept
// (a later attempt replaces it). A Chromium process ended by the hook's
// memory limit (<PLUGIN>_MAX_MEMORY): final failure naming the limit, as
// soon as it is seen.
func runCapture(ctx context.Context, h *Hook, c capture) (hookio.Result, error) {
	if meta, err := readHeadersJSON(h.SnapDir); err == nil && meta.Denied != "" {
		// The fetch policy refused the page (or a redirect of it) when the
		// headers hook fetched it: Chromium would capture its own error
		// page. A final failure naming the rule, as for the headers hook.
		return hookio.Result{Status: model.StatusFailed, OutputStr: "fetch denied by the fetch policy", Error: meta.Denied}, nil
	}
	bin, err := chrome.Find(h.Inv.String(h.Inv.Key("BINARY"), h.Inv.String("CHROME_BINARY", "")))
	if errors.Is(err, chrome.ErrNotFound) {
		return hookio.Result{}, skip("%s needs Chromium: %v", h.Inv.Plugin, err)
	}
	if err != nil {
		return hookio.Result{}, err
	}
	extra, err := h.Inv.StringList(h.Inv.Key("ARGS"))
	if err != nil {
		return hookio.Result{}, err
	}
	final := filepath.Join(h.Dir, c.file)
	tmp := filepath.Join(h.Dir, ".partial."+c.file) // renamed once whole and valid
	defer os.Remove(tmp)

	runCtx, cancel := context.WithTimeout(ctx, h.Inv.Timeout)
	defer cancel()
	out, err := os.Create(tmp)
	if err != nil {
		return hookio.Result{}, fmt.Errorf("%s: create output: %w", h.Inv.Plugin, err)
	}
	defer out.Close()
	spec := chrome.Capture{
		Binary: bin, UserAgent: h.Inv.UserAgent, Extra: extra, Kind: c.kind, Viewport: c.viewport,
		URL: h.Inv.URL, Out: out, Grace: chromeGrace,
	}
	if p := h.Inv.FetchProxy; p != nil {
		spec.Proxy = p.String()
	}
	if m := procs.OwnMemoryLimit(); m.Limit > 0 {
		spec.Memory = chrome.Memory{Limit: m.Limit, PerProcess: m.PerProcess(), OOMKills: m.OOMKills, Peak: m.Peak}
	}
	page, err := chrome.Run(runCtx, spec)
	if err != nil {
		var merr *chrome.MemoryError
		if errors.As(err, &merr) {
			// The same page runs into the same limit on every attempt: a
			// final failure naming it, not a retry.
			return hookio.Result{Status: model.StatusFailed, OutputStr: "stopped at the memory limit", Error: merr.Error(),
				OutputJSON: map[string]any{"limit": "memory", "memory_limit": merr.Limit, "rlimit_data": merr.PerProcess,
					"process": merr.Process, "peak_rss": merr.PeakRSS, "peak_rss_total": merr.PeakTotal,
					"cgroup_peak": merr.CgroupPeak, "seconds": merr.After.Seconds(), "browser": bin}}, nil
		}
		var derr *chrome.DownloadError
		if errors.As(err, &derr) && !model.TransientStatus(derr.Page.Status) {
			// The site's final answer, which no retry changes: nothing
			// for a browser to show.
			return hookio.Result{Status: model.StatusNoResults, OutputStr: derr.Error(), OutputJSON: pageJSON(derr.Page, bin)}, nil
		}
		return hookio.Result{}, fmt.Errorf("%s: %w", h.Inv.Plugin, err)
	}
	if err := out.Close(); err != nil {
		return hookio.Result{}, fmt.Errorf("%s: write output: %w", h.Inv.Plugin, err)
	}
	size, err := checkOutput(tmp, c.magic)
	if err != nil {
		return hookio.Result{}, fmt.Errorf("%s: chromium produced no valid %s: %w", h.Inv.Plugin, c.file, err)
	}
	if err := os.Rename(tmp, final); err != nil {
		return hookio.Result{}, fmt.Errorf("%s: %w", h.Inv.Plugin, err)
	}
	if model.TransientStatus(page.Status) {
		return hookio.Result{}, fmt.Errorf("%s: %s answered HTTP %d", h.Inv.Plugin, page.URL, page.Status)
	}
	res := pageJSON(page, bin)
	res["file"], res["bytes"] = c.file, size
	return hookio.Result{Status: model.StatusSucceeded, OutputStr: c.file, OutputJSON: res}, nil
}

// pageJSON is a browser hook's output_json about the page's answer.
func pageJSON(page chrome.Page, browser string) map[string]any {
	return map[string]any{"status": page.Status, "final_url": page.URL, "mime_type": page.MIMEType, "browser": browser}
}

func checkOutput(path string, magic []byte) (int64, error) {
	head, err := readCapped(path, 16)
	if err != nil {
		return 0, err
	}
	if len(head) == 0 {
		return 0, errors.New("output is empty")
	}
	if magic != nil && !bytes.HasPrefix(head, magic) {
		return 0, fmt.Errorf("output starts with %q, want %q", head, magic)
	}
	info, err := os.Stat(path)
	if err != nil {
		return 0, err
	}
	return info.Size(), nil
}
