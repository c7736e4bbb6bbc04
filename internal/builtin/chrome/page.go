package chrome

import (
	"cmp"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
)

// Kind is what a capture keeps of the page.
type Kind int

// The captures.
const (
	Screenshot Kind = iota + 1 // PNG of the window (--window-size in Extra sets it)
	PDF                        // the page printed, without header and footer
	DOM                        // the document's doctype and outerHTML after load
)

func (k Kind) String() string {
	switch k {
	case Screenshot:
		return "screenshot"
	case PDF:
		return "pdf"
	case DOM:
		return "dom"
	}
	return fmt.Sprintf("Kind(%d)", int(k))
}

// Viewport is a page's size in CSS pixels, drawn one device pixel each.
type Viewport struct{ Width, Height int }

// Page is what Chromium was answered for the page it captured: its main
// document's HTTP status, URL after redirects and media type (Status 0:
// an answer that was not HTTP's, e.g. a data: URL).
type Page struct {
	Status   int
	URL      string
	MIMEType string
}

// DownloadError is a page Chromium did not show: its main document was
// answered, but as a download (Content-Disposition: attachment, or a type
// the browser does not render), so there is nothing to capture.
type DownloadError struct{ Page Page }

func (e *DownloadError) Error() string {
	return fmt.Sprintf("%s answered HTTP %d with %s as a download, which Chromium does not render",
		e.Page.URL, e.Page.Status, cmp.Or(e.Page.MIMEType, "a body"))
}

// domScript serialises the loaded document as headless Chromium's
// --dump-dom does: the doctype, then the root element's markup.
const domScript = `(document.doctype ? new XMLSerializer().serializeToString(document.doctype) + "\n" : "") +
	(document.documentElement ? document.documentElement.outerHTML : "")`

// pageState collects, on the DevTools reading goroutine, the events drive
// waits for: the main frame's document answers and load events.
type pageState struct {
	mu      sync.Mutex
	session string
	answers map[string]Page // loaderId → the main frame's document answer
	loaded  map[string]bool // loaderId → its load event fired
	changed chan struct{}   // a non-blocking nudge after each change
}

func newPageState() *pageState {
	return &pageState{answers: map[string]Page{}, loaded: map[string]bool{}, changed: make(chan struct{}, 1)}
}

func (s *pageState) event(method, session string, params json.RawMessage) {
	switch method {
	case "Network.responseReceived", "Page.lifecycleEvent":
	default:
		return
	}
	var p struct {
		Type     string `json:"type"`
		Name     string `json:"name"`
		FrameID  string `json:"frameId"`
		LoaderID string `json:"loaderId"`
		Response struct {
			Status   int    `json:"status"`
			URL      string `json:"url"`
			MIMEType string `json:"mimeType"`
		} `json:"response"`
	}
	if json.Unmarshal(params, &p) != nil {
		return
	}
	s.mu.Lock()
	if session != s.session {
		s.mu.Unlock()
		return
	}
	switch {
	case method == "Network.responseReceived" && p.Type == "Document":
		s.answers[p.FrameID+" "+p.LoaderID] = Page{Status: p.Response.Status, URL: p.Response.URL, MIMEType: p.Response.MIMEType}
	case method == "Page.lifecycleEvent" && p.Name == "load":
		s.loaded[p.FrameID+" "+p.LoaderID] = true
	}
	s.mu.Unlock()
	select {
	case s.changed <- struct{}{}:
	default:
	}
}

// waitLoad waits for the load event of the navigation (frame, loader) and
// returns the document's answer.
func (s *pageState) waitLoad(ctx context.Context, frame, loader string) (Page, error) {
	key := frame + " " + loader
	for {
		s.mu.Lock()
		done, page := s.loaded[key], s.answers[key]
		s.mu.Unlock()
		if done {
			return page, nil
		}
		select {
		case <-s.changed:
		case <-ctx.Done():
			return page, fmt.Errorf("waiting for the page to load: %w", ctx.Err())
		}
	}
}

// drive opens a page in the browser behind d, loads c.URL in it, and
// returns what c.Kind captures of it, with the page's answer. A navigation
// that fails is a *LoadError: Chromium would capture its own error page,
// which the origin never sent.
func drive(ctx context.Context, d *devtools, s *pageState, c Capture) ([]byte, Page, error) {
	var target struct {
		TargetID string `json:"targetId"`
	}
	if err := d.call(ctx, "", "Target.createTarget", map[string]any{"url": "about:blank"}, &target); err != nil {
		return nil, Page{}, err
	}
	var attached struct {
		SessionID string `json:"sessionId"`
	}
	if err := d.call(ctx, "", "Target.attachToTarget", map[string]any{"targetId": target.TargetID, "flatten": true}, &attached); err != nil {
		return nil, Page{}, err
	}
	sid := attached.SessionID
	s.mu.Lock()
	s.session = sid
	s.mu.Unlock()
	for _, m := range []string{"Page.enable", "Network.enable"} {
		if err := d.call(ctx, sid, m, struct{}{}, nil); err != nil {
			return nil, Page{}, err
		}
	}
	if err := d.call(ctx, sid, "Page.setLifecycleEventsEnabled", map[string]any{"enabled": true}, nil); err != nil {
		return nil, Page{}, err
	}
	if v := c.Viewport; v.Width > 0 && v.Height > 0 {
		if err := d.call(ctx, sid, "Emulation.setDeviceMetricsOverride", map[string]any{
			"width": v.Width, "height": v.Height, "deviceScaleFactor": 1, "mobile": false}, nil); err != nil {
			return nil, Page{}, err
		}
	}
	var nav struct {
		FrameID   string `json:"frameId"`
		LoaderID  string `json:"loaderId"`
		ErrorText string `json:"errorText"`
	}
	if err := d.call(ctx, sid, "Page.navigate", map[string]any{"url": c.URL}, &nav); err != nil {
		return nil, Page{}, err
	}
	if nav.ErrorText != "" {
		s.mu.Lock()
		page, answered := s.answers[nav.FrameID+" "+nav.LoaderID]
		s.mu.Unlock()
		if answered && nav.ErrorText == "net::ERR_ABORTED" {
			// Answered, then not shown: Chromium turned the answer into
			// a download.
			return nil, page, &DownloadError{Page: page}
		}
		return nil, page, &LoadError{Net: nav.ErrorText}
	}
	page, err := s.waitLoad(ctx, nav.FrameID, nav.LoaderID)
	if err != nil {
		return nil, page, err
	}
	data, err := capture(ctx, d, sid, c.Kind)
	return data, page, err
}

// capture takes kind of the loaded page of session sid.
func capture(ctx context.Context, d *devtools, sid string, kind Kind) ([]byte, error) {
	var out struct {
		Data   string `json:"data"`
		Result struct {
			Value string `json:"value"`
		} `json:"result"`
		ExceptionDetails *struct {
			Text string `json:"text"`
		} `json:"exceptionDetails"`
	}
	switch kind {
	case Screenshot:
		if err := d.call(ctx, sid, "Page.captureScreenshot", map[string]any{"format": "png"}, &out); err != nil {
			return nil, err
		}
	case PDF:
		if err := d.call(ctx, sid, "Page.printToPDF", map[string]any{"displayHeaderFooter": false}, &out); err != nil {
			return nil, err
		}
	case DOM:
		if err := d.call(ctx, sid, "Runtime.evaluate", map[string]any{"expression": domScript, "returnByValue": true}, &out); err != nil {
			return nil, err
		}
		if out.ExceptionDetails != nil {
			return nil, fmt.Errorf("serialise the DOM: %s", out.ExceptionDetails.Text)
		}
		return []byte(out.Result.Value), nil
	default:
		return nil, errors.New("unknown capture " + kind.String())
	}
	b, err := base64.StdEncoding.DecodeString(out.Data)
	if err != nil {
		return nil, fmt.Errorf("%s: decode: %w", kind, err)
	}
	return b, nil
}
