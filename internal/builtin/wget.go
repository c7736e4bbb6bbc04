package builtin

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"go.uber.org/zap"

	"github.com/archiveflow/archiveflow/internal/builtin/hookio"
	"github.com/archiveflow/archiveflow/internal/builtin/wgetlog"
	"github.com/archiveflow/archiveflow/internal/egress"
	"github.com/archiveflow/archiveflow/internal/model"
	"github.com/archiveflow/archiveflow/internal/netpolicy"
	"github.com/archiveflow/archiveflow/internal/warc"
)

// Files of the wget hook (in SNAP_DIR/wget/).
const (
	wgetSummaryFile = "wget.json"
	wgetLogFile     = "wget.log"
	wgetWARCDir     = "warc"
	wgetWARCBase    = "archive" // wget appends .warc.gz
)

// wgetGrace is how long wget gets between our SIGTERM and SIGKILL.
const wgetGrace = 5 * time.Second

// wgetSummary is wget.json. It is first written as soon as the page itself
// is saved (Complete false), so hooks of later steps can read the page while
// wget still fetches requisites, and rewritten when wget ends.
type wgetSummary struct {
	WARC            string `json:"warc"`
	MainURL         string `json:"main_url,omitempty"`
	MainFile        string `json:"main_file,omitempty"` // relative to the wget dir
	MainStatus      int    `json:"main_status"`
	MainContentType string `json:"main_content_type,omitempty"`
	Responses       int    `json:"responses"`
	Bytes           int64  `json:"bytes"`
	Errors          int    `json:"errors"`
	Complete        bool   `json:"complete"`
	Stopped         bool   `json:"stopped,omitempty"` // ended by SIGTERM (seal or abort)
	ExitCode        int    `json:"exit_code"`
}

func readWgetJSON(snapDir string) (*wgetSummary, error) {
	var s wgetSummary
	if err := readJSON(snapDir, "wget/"+wgetSummaryFile, &s); err != nil {
		return nil, err
	}
	return &s, nil
}

// runWget archives the page and its requisites (FETCH_DEPTH=inf: the whole
// site) into a WARC with the system wget, and reports one Response record per
// request as wget's log streams by. SIGTERM stops wget; the hook still
// reports what was archived.
func runWget(ctx context.Context, h *Hook) (hookio.Result, error) {
	bin, err := exec.LookPath(h.Inv.String(h.Inv.Key("BINARY"), "wget"))
	if err != nil {
		return hookio.Result{}, skip("wget is not installed (%v); install GNU Wget or set WGET_BINARY", err)
	}
	extra, err := h.Inv.StringList(h.Inv.Key("ARGS"))
	if err != nil {
		return hookio.Result{}, err
	}
	if err := os.MkdirAll(filepath.Join(h.Dir, wgetWARCDir), 0o755); err != nil {
		return hookio.Result{}, fmt.Errorf("wget: create warc dir: %w", err)
	}
	logFile, err := os.Create(filepath.Join(h.Dir, wgetLogFile))
	if err != nil {
		return hookio.Result{}, fmt.Errorf("wget: create log: %w", err)
	}
	defer logFile.Close()

	args := wgetArgs(h.Inv, extra)
	h.Log.Info("starting wget", zap.String("binary", bin), zap.Strings("args", args))
	cmd := exec.Command(bin, args...)
	cmd.Dir = h.Dir
	cmd.Env = append(os.Environ(), "LC_ALL=C", "LANG=C", "LANGUAGE=")
	stderr, err := cmd.StderrPipe()
	if err != nil {
		return hookio.Result{}, fmt.Errorf("wget: %w", err)
	}
	if err := cmd.Start(); err != nil {
		return hookio.Result{}, fmt.Errorf("wget: start %s: %w", bin, err)
	}
	stopped := stopOnCancel(ctx, cmd.Process, wgetGrace)

	t := newWgetTracker(ctx, h)
	parser := wgetlog.NewParser(t.fetched)
	scanErr := parser.Scan(io.TeeReader(stderr, logFile))
	waitErr := cmd.Wait()
	// The runner signals the whole process group, so wget may get SIGTERM
	// and exit before this process has seen its own SIGTERM (ctx still
	// live): a wget ended by SIGTERM was stopped whoever sent it.
	wasStopped := stopped() || ctx.Err() != nil || endedBy(cmd.ProcessState, syscall.SIGTERM)
	if scanErr != nil {
		h.Log.Warn("reading wget log", zap.Error(scanErr))
	}
	if err := t.dropDenied(filepath.Join(h.Dir, t.sum.WARC)); err != nil {
		return hookio.Result{}, fmt.Errorf("wget: %w", err)
	}
	return t.result(exitCode(waitErr), wasStopped)
}

// wgetArgs builds wget's argv; the URL is its last element, after "--".
func wgetArgs(inv *hookio.Invocation, extra []string) []string {
	args := []string{
		"--no-config", "-e", "robots=off", "--page-requisites",
		"--warc-file=" + wgetWARCDir + "/" + wgetWARCBase,
		// --waitretry=0: the retry follows at once. A request the fetch
		// proxy refuses gets no answer, which wget retries; waiting a
		// second for each refused requisite would let the seal cut wget
		// short on a page with many of them.
		"--progress=dot:giga", "--tries=2", "--waitretry=0",
		"--timeout=" + strconv.Itoa(int(inv.Timeout/time.Second)),
	}
	if inv.UserAgent != "" {
		args = append(args, "--user-agent="+inv.UserAgent)
	}
	if p := inv.FetchProxy; p != nil {
		// Every request, redirect and requisite through the runner's
		// fetch proxy, which enforces the fetch policy.
		args = append(args, "-e", "use_proxy=on", "-e", "http_proxy="+p.String(), "-e", "https_proxy="+p.String(), "-e", "no_proxy=")
	}
	if inv.FetchDepth == model.FetchInf {
		args = append(args, "--recursive", "--level=inf", "--no-parent")
	} else {
		// No recursion: requisites may come from other hosts (CDNs).
		args = append(args, "--span-hosts")
	}
	if inv.DelayMax > 0 {
		mid := (inv.DelayMin + inv.DelayMax) / 2
		args = append(args, "--wait="+strconv.FormatFloat(mid.Seconds(), 'f', 3, 64))
		if inv.DelayMax > inv.DelayMin {
			args = append(args, "--random-wait")
		}
	}
	if len(inv.IgnorePatterns) > 0 {
		alts := make([]string, len(inv.IgnorePatterns))
		for i, p := range inv.IgnorePatterns {
			alts[i] = "(" + posixRegex(p) + ")"
		}
		args = append(args, "--regex-type=posix", "--reject-regex="+strings.Join(alts, "|"))
	}
	args = append(args, extra...)
	return append(args, "--", inv.URL)
}

// posixRegex rewrites the RE2 shorthands wget's POSIX regex engine lacks
// (\d \D \w \W \s \S and non-capturing groups) into POSIX ERE.
func posixRegex(re string) string {
	repl := map[byte]string{
		'd': "[0-9]", 'D': "[^0-9]", 'w': "[[:alnum:]_]", 'W': "[^[:alnum:]_]",
		's': "[[:space:]]", 'S': "[^[:space:]]",
	}
	var b strings.Builder
	for i := 0; i < len(re); i++ {
		c := re[i]
		switch {
		case c == '\\' && i+1 < len(re):
			if r, ok := repl[re[i+1]]; ok {
				b.WriteString(r)
			} else {
				b.WriteByte(c)
				b.WriteByte(re[i+1])
			}
			i++
		case c == '(' && strings.HasPrefix(re[i:], "(?:"):
			b.WriteByte('(')
			i += 2
		default:
			b.WriteByte(c)
		}
	}
	return b.String()
}

// stopOnCancel sends SIGTERM to p when ctx ends, then SIGKILL after grace.
// The returned func (call after p was waited for) reports whether it did.
func stopOnCancel(ctx context.Context, p *os.Process, grace time.Duration) func() bool {
	done := make(chan struct{})
	var signalled bool
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		select {
		case <-done:
			return
		case <-ctx.Done():
		}
		signalled = true
		_ = p.Signal(syscall.SIGTERM)
		select {
		case <-done:
		case <-time.After(grace):
			_ = p.Kill()
		}
	}()
	return func() bool {
		close(done)
		wg.Wait()
		return signalled
	}
}

// endedBy reports whether the process was terminated by sig.
func endedBy(ps *os.ProcessState, sig syscall.Signal) bool {
	if ps == nil {
		return false
	}
	ws, ok := ps.Sys().(syscall.WaitStatus)
	return ok && ws.Signaled() && ws.Signal() == sig
}

func exitCode(err error) int {
	var ee *exec.ExitError
	switch {
	case err == nil:
		return 0
	case errors.As(err, &ee):
		return ee.ExitCode()
	}
	return -1
}

// wgetTracker turns parsed fetches into Response records and the summary.
type wgetTracker struct {
	ctx     context.Context
	h       *Hook
	sum     wgetSummary
	mainSet bool   // the seed's final answer is known
	lastErr string // wget's last failure message
	// mainDenied is the refusal that ended the seed's redirect chain.
	mainDenied string
	// unanswered are the targets the attempt's fetch proxy answered
	// without the site, as last read from it.
	unanswered *egress.Unanswered
}

func newWgetTracker(ctx context.Context, h *Hook) *wgetTracker {
	return &wgetTracker{ctx: ctx, h: h, sum: wgetSummary{WARC: wgetWARCDir + "/" + wgetWARCBase + ".warc.gz"}}
}

// proxied returns what the attempt's fetch proxy says of u: the rule it
// refused u with, or whether it could not reach u's site at all (nothing
// of u reached it). wget only saw its connection close. fresh re-reads
// the proxy's list first. A refused tunnel (https) is known by host:port
// only; tunnels matches u's host:port against those too.
func (t *wgetTracker) proxied(u string, fresh, tunnels bool) (rule string, unreachable bool) {
	p := t.h.Inv.FetchProxy
	if p == nil {
		return "", false // no proxy: no policy, wget connected itself
	}
	if t.unanswered == nil || fresh {
		un, err := egress.Refusals(t.ctx, p)
		if err != nil {
			t.h.Log.Warn("cannot read the fetch proxy's refusals", zap.Error(err))
			return "", false
		}
		t.unanswered = &un
	}
	if r, ok := t.unanswered.Refused[u]; ok {
		return r, false
	}
	if _, ok := t.unanswered.Unreachable[u]; ok {
		return "", true
	}
	if host, port, err := netpolicy.HostPort(u); err == nil && tunnels {
		if r, ok := t.unanswered.Refused[net.JoinHostPort(host, strconv.Itoa(port))]; ok {
			return r, false
		}
	}
	return "", false
}

func (t *wgetTracker) fetched(f wgetlog.Fetch) {
	if f.Status == 0 {
		if rule, _ := t.proxied(f.URL, true, true); rule != "" {
			t.refusedFetch(f.URL, rule)
			return
		}
	}
	t.record(f)
}

// refusedFetch notes a fetch the proxy refused: no response, nothing to
// count; the seed's chain ending there ends the hook (final).
func (t *wgetTracker) refusedFetch(u, rule string) {
	if !t.mainSet {
		t.mainSet = true
		t.mainDenied = (&deniedError{url: u, rule: rule}).Error()
	}
}

// record counts one of wget's fetches and prints its Response record.
func (t *wgetTracker) record(f wgetlog.Fetch) {
	t.sum.Responses++
	t.sum.Bytes += f.Bytes
	if f.Status == 0 || f.Status >= 400 {
		t.sum.Errors++
		t.lastErr = fmt.Sprintf("%s: %s", f.URL, firstNonEmpty(f.Reason, fmt.Sprintf("HTTP %d", f.Status)))
	}
	t.h.responseCode(f.URL, f.Status, f.Bytes, f.Code)
	// wget fetches the seed first and follows its redirects at once: the
	// first answer that is not a redirect is the page itself.
	if !t.mainSet && (f.Status < 300 || f.Status >= 400) {
		t.mainSet = true
		t.sum.MainURL, t.sum.MainStatus, t.sum.MainContentType = f.URL, f.Status, f.Type
		t.sum.MainFile = f.Saved
		if f.Saved != "" {
			t.save()
		}
	}
}

func (t *wgetTracker) save() {
	if err := writeJSON(filepath.Join(t.h.Dir, wgetSummaryFile), t.sum); err != nil {
		t.h.Log.Warn("cannot write wget summary", zap.Error(err))
	}
}

// result decides the hook's status: the seed answered 2xx → succeeded; the
// seed answered an HTTP error → failed (the page's own answer, not
// retried), or a transient error when model.TransientStatus says the site
// could not answer now; no answer at all → transient error (retried),
// unless wget was stopped.
func (t *wgetTracker) result(code int, stopped bool) (hookio.Result, error) {
	t.sum.Complete, t.sum.Stopped, t.sum.ExitCode = !stopped, stopped, code
	t.save()
	out := map[string]any{
		"warc": t.sum.WARC, "responses": t.sum.Responses, "bytes": t.sum.Bytes, "errors": t.sum.Errors,
		"main_status": t.sum.MainStatus, "main_file": t.sum.MainFile, "exit_code": code, "stopped": stopped,
		"file": wgetSummaryFile,
	}
	desc := fmt.Sprintf("%d responses, %d bytes, %d errors", t.sum.Responses, t.sum.Bytes, t.sum.Errors)
	if stopped {
		desc += " (stopped by SIGTERM)"
	}
	switch {
	case t.sum.MainStatus >= 200 && t.sum.MainStatus < 300:
		return hookio.Result{Status: model.StatusSucceeded, OutputStr: desc, OutputJSON: out}, nil
	case model.TransientStatus(t.sum.MainStatus) && !stopped:
		return hookio.Result{}, fmt.Errorf("%s answered HTTP %d", t.sum.MainURL, t.sum.MainStatus)
	case t.sum.MainStatus >= 300:
		return hookio.Result{Status: model.StatusFailed, OutputStr: desc, OutputJSON: out,
			Error: fmt.Sprintf("%s answered HTTP %d", t.sum.MainURL, t.sum.MainStatus)}, nil
	case t.mainDenied != "":
		return hookio.Result{Status: model.StatusFailed, OutputStr: "fetch denied by the fetch policy", OutputJSON: out,
			Error: t.mainDenied}, nil
	case stopped:
		return hookio.Result{Status: model.StatusNoResults, OutputStr: desc, OutputJSON: out,
			Error: "stopped before the page was fetched"}, nil
	}
	return hookio.Result{}, fmt.Errorf("wget exited %d without fetching the page: %s", code, firstNonEmpty(t.lastErr, "see "+wgetLogFile))
}

// dropDenied removes from wget's WARC every record of a URL the attempt's
// fetch proxy refused or could not reach: wget writes a request record
// before it learns that the request will get no answer, and a request that
// never reached the site is not evidence of anything it did. It also
// makes each forwarded request's record what the origin received: wget
// records the absolute-form request it sent the proxy, the proxy sends
// the origin the origin-form (egress.ForwardedHead).
func (t *wgetTracker) dropDenied(path string) error {
	if _, err := os.Stat(path); errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if t.h.Inv.FetchProxy == nil {
		return nil
	}
	t.proxied("", true, false) // the final list
	n, err := warc.Edit(path, func(h warc.Header, block io.Reader) (warc.Change, error) {
		if h.TargetURI == "" {
			return warc.Change{}, nil
		}
		// Forwarded requests only, by their exact URL: a tunnel the proxy
		// refused or could not open carried no request wget could record,
		// and another URL of the same host may have been fetched.
		if rule, unreachable := t.proxied(h.TargetURI, false, false); rule != "" || unreachable {
			return warc.Change{Drop: true}, nil
		}
		if h.Type != "request" || !strings.HasPrefix(strings.ToLower(h.TargetURI), "http://") || h.ContentLength > maxRequestBlock {
			return warc.Change{}, nil // https went through a tunnel: recorded as sent
		}
		return asForwarded(block)
	})
	if err != nil {
		return fmt.Errorf("fix wget's WARC for the fetch proxy: %w", err)
	}
	if n > 0 {
		t.h.Log.Info("WARC records of refused fetches dropped, of forwarded requests made what the origin received", zap.Int("records", n))
	}
	return nil
}

// maxRequestBlock bounds the request record blocks rewritten (a GET's is
// its head; a larger one, a request body, is left as recorded).
const maxRequestBlock = 1 << 20

// asForwarded is the change that makes a request record's block what the
// fetch proxy sent the origin; none when its head is not an absolute-form
// request.
func asForwarded(block io.Reader) (warc.Change, error) {
	b, err := io.ReadAll(block)
	if err != nil {
		return warc.Change{}, err
	}
	end := bytes.Index(b, []byte("\r\n\r\n"))
	if end < 0 {
		return warc.Change{}, nil
	}
	head, err := egress.ForwardedHead(b[:end+4])
	if err != nil {
		return warc.Change{}, nil // not a forwarded request: leave it as recorded
	}
	return warc.Change{Block: append(head, b[end+4:]...)}, nil
}

func firstNonEmpty(s ...string) string {
	for _, v := range s {
		if v != "" {
			return v
		}
	}
	return ""
}
