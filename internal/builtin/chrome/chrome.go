// Package chrome owns running headless Chromium once per capture: finding
// the binary, building its command line (a fresh profile directory, no
// sandbox, no background networking), driving one page over the DevTools
// protocol on a pipe (the URL never on a command line or through a
// shell), and telling a capture from a page that did not load, with the
// HTTP status the page was answered.
package chrome

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"
)

// Candidates are the executables searched on PATH when no binary is configured.
var Candidates = []string{"chromium", "chromium-browser", "google-chrome", "google-chrome-stable", "chrome"}

// ErrNotFound means no Chromium executable could be found.
var ErrNotFound = errors.New("no Chromium found")

// Missing reports whether reason, a browser hook's skip reason, says it
// was skipped because no Chromium was found.
func Missing(reason string) bool { return strings.Contains(reason, ErrNotFound.Error()) }

// EnableHint tells the user how to enable the hooks of plugins that were
// skipped because no Chromium was found.
func EnableHint(plugins []string) string {
	return "install chromium (or set CHROME_BINARY) to enable " + strings.Join(plugins, ", ")
}

// Find returns the path of the Chromium to use: configured when non-empty
// (a path or a name on PATH), else the first of Candidates on PATH.
func Find(configured string) (string, error) {
	if configured != "" {
		p, err := exec.LookPath(configured)
		if err != nil {
			return "", fmt.Errorf("%w: configured binary %q: %v", ErrNotFound, configured, err)
		}
		return p, nil
	}
	for _, c := range Candidates {
		if p, err := exec.LookPath(c); err == nil {
			return p, nil
		}
	}
	return "", fmt.Errorf("%w: none of %s is on PATH (install chromium or set CHROME_BINARY)",
		ErrNotFound, strings.Join(Candidates, ", "))
}

// Capture describes one headless Chromium run.
type Capture struct {
	Binary    string   // from Find
	UserAgent string   // empty: Chromium's own
	Extra     []string // operator arguments (<PLUGIN>_ARGS)
	Kind      Kind     // what to capture
	// Viewport, when set, is the page's size in CSS pixels, a screenshot's
	// size in pixels; otherwise the window's.
	Viewport Viewport
	URL      string        // the page; sent over the DevTools pipe
	Out      io.Writer     // receives the capture
	Grace    time.Duration // SIGTERM → SIGKILL delay on cancellation
	// Proxy, when set, is the runner's fetch proxy: every request of the
	// page goes through it, loopback included.
	Proxy string
	// Memory is the limit Chromium runs under; with one, a Chromium
	// process ended by it stops the capture at once (*MemoryError).
	Memory Memory
}

// ProxyArgs are the flags that send every request of the browser through
// proxy: loopback too (Chromium bypasses a proxy for it by default), and no
// WebRTC UDP, which would go around any proxy.
func ProxyArgs(proxy string) []string {
	return []string{
		"--proxy-server=" + proxy, "--proxy-bypass-list=<-loopback>",
		"--force-webrtc-ip-handling-policy=disable_non_proxied_udp",
	}
}

// BaseArgs are the flags every capture uses, given its profile directory.
func BaseArgs(profileDir string) []string {
	return []string{
		"--headless", "--no-sandbox", "--disable-gpu", "--disable-quic",
		"--no-first-run", "--no-default-browser-check",
		"--disable-background-networking", "--disable-component-update",
		"--disable-sync", "--disable-dev-shm-usage", "--hide-scrollbars",
		"--mute-audio", "--user-data-dir=" + profileDir,
	}
}

// Run runs one capture with a throw-away profile directory: Chromium
// loads c.URL in a new page, and the capture goes to c.Out. It returns the
// page's answer, and Chromium's stderr tail in the error when Chromium
// fails. Cancelling ctx sends SIGTERM, then SIGKILL after Grace. Under a
// memory limit (c.Memory), a Chromium process ended by the limit stops
// Chromium the same way and Run returns a *MemoryError.
func Run(ctx context.Context, c Capture) (Page, error) {
	profile, err := os.MkdirTemp("", "archiveflow-chrome-")
	if err != nil {
		return Page{}, fmt.Errorf("create chromium profile dir: %w", err)
	}
	defer os.RemoveAll(profile)

	args := append(BaseArgs(profile), "--remote-debugging-pipe")
	if c.UserAgent != "" {
		args = append(args, "--user-agent="+c.UserAgent)
	}
	if c.Proxy != "" {
		args = append(args, ProxyArgs(c.Proxy)...)
	}
	args = append(args, c.Extra...)
	args = append(args, "about:blank")

	// Files, not pipes: Chromium's helper processes inherit stdio and may
	// outlive the browser process for a moment.
	stderr, err := os.Create(filepath.Join(profile, "chromium.stderr.log"))
	if err != nil {
		return Page{}, fmt.Errorf("create chromium log: %w", err)
	}
	defer stderr.Close()
	// Chromium reads commands on its fd 3 and writes on its fd 4.
	cmdR, cmdW, err := os.Pipe()
	if err != nil {
		return Page{}, fmt.Errorf("chromium devtools pipe: %w", err)
	}
	defer cmdW.Close()
	outR, outW, err := os.Pipe()
	if err != nil {
		cmdR.Close()
		return Page{}, fmt.Errorf("chromium devtools pipe: %w", err)
	}
	defer outR.Close()

	runCtx, stop := context.WithCancel(ctx)
	defer stop()
	cmd := exec.CommandContext(runCtx, c.Binary, args...)
	cmd.Stdout = stderr
	cmd.Stderr = stderr
	cmd.ExtraFiles = []*os.File{cmdR, outW}
	cmd.Env = append(os.Environ(), "HOME="+profile)
	cmd.Cancel = func() error { return cmd.Process.Signal(syscall.SIGTERM) }
	cmd.WaitDelay = c.Grace
	err = cmd.Start()
	cmdR.Close()
	outW.Close()
	if err != nil {
		return Page{}, fmt.Errorf("chromium %s: %w", c.Kind, err)
	}
	state := newPageState()
	tools := newDevtools(cmdW, outR, state.event)

	// The watch follows Chromium's processes so that none outlives the
	// capture; under a memory limit it also looks every memoryPoll.
	watch := newMemoryWatch(c.Memory, cmd.Process.Pid)
	done, watched := make(chan struct{}), make(chan struct{})
	if c.Memory.Limit > 0 {
		go func() {
			defer close(watched)
			watch.run(done, func() { watch.killAll(); stop() })
		}()
	} else {
		close(watched)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()

	data, page, derr := drive(runCtx, tools, state, c)
	// A page that did not load, or was a download, leaves Chromium well.
	healthy := derr == nil || errors.As(derr, new(*LoadError)) || errors.As(derr, new(*DownloadError))
	watch.look() // Chromium's processes now, to see each of them end
	var werr error
	if healthy {
		// Done with the page: ask Chromium to close, and stop it when it
		// does not within Grace.
		closeCtx, cancel := context.WithTimeout(runCtx, c.Grace)
		_ = tools.call(closeCtx, "", "Browser.close", struct{}{}, nil)
		cancel()
		select {
		case <-exited:
		case <-time.After(c.Grace):
			stop()
			<-exited
		}
	} else {
		// Chromium failed, or ended, or ctx is done: it goes now.
		stop()
		werr = <-exited
	}
	close(done)
	<-watched
	watch.endRest()
	if merr := watch.stopped(); merr != nil {
		return page, merr
	}
	if !healthy && c.Memory.Limit > 0 && ctx.Err() == nil {
		// Chromium failed on its own: a process the limit ended since
		// the last look may be why.
		if merr := watch.verdict(); merr != nil {
			return page, merr
		}
	}
	switch {
	case derr == nil:
	case ctx.Err() != nil:
		return page, fmt.Errorf("chromium %s: %w", c.Kind, ctx.Err())
	case errors.As(derr, new(*LoadError)), errors.As(derr, new(*DownloadError)):
		return page, derr
	case werr != nil && !errors.Is(werr, context.Canceled) && !isSignal(werr, syscall.SIGTERM):
		return page, fmt.Errorf("chromium %s: %w; stderr: %s", c.Kind, werr, tail(stderr.Name()))
	default:
		return page, fmt.Errorf("chromium %s: %w; stderr: %s", c.Kind, derr, tail(stderr.Name()))
	}
	if _, err := c.Out.Write(data); err != nil {
		return page, fmt.Errorf("chromium %s: write the capture: %w", c.Kind, err)
	}
	return page, nil
}

// isSignal reports whether err is a process ended by sig.
func isSignal(err error, sig syscall.Signal) bool {
	var ee *exec.ExitError
	if !errors.As(err, &ee) {
		return false
	}
	ws, ok := ee.Sys().(syscall.WaitStatus)
	return ok && ws.Signaled() && ws.Signal() == sig
}

// LoadError is a capture whose page did not load: the navigation failed,
// so Chromium has nothing of the page, only its own error page, which the
// origin never sent.
type LoadError struct {
	Net string // Chromium's net error, e.g. net::ERR_CONNECTION_REFUSED
}

func (e *LoadError) Error() string { return "the page did not load: " + e.Net }

const tailMax = 2048

// tail returns the last bytes of the file at path, for error messages.
func tail(path string) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return "(unreadable: " + err.Error() + ")"
	}
	if len(b) > tailMax {
		b = b[len(b)-tailMax:]
	}
	return strings.TrimSpace(string(b))
}
