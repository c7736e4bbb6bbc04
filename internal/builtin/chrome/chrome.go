// Package chrome owns running headless Chromium once per capture: finding
// the binary, building its command line (a fresh profile directory, no
// sandbox, no background networking), running it with the URL passed as a
// single argv element, never through a shell, and telling a capture from a
// page that did not load.
package chrome

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
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
	Extra     []string // operator arguments (<PLUGIN>_ARGS), before the capture flag
	Flag      string   // the capture flag, e.g. "--screenshot=/abs/screenshot.png"
	URL       string   // the page; passed as one argv element
	Stdout    io.Writer
	Grace     time.Duration // SIGTERM → SIGKILL delay on cancellation
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

// Run runs one capture with a throw-away profile directory and returns
// Chromium's stderr tail in the error when it fails. Cancelling ctx sends
// SIGTERM, then SIGKILL after Grace. Under a memory limit (c.Memory), a
// Chromium process ended by the limit stops Chromium the same way and Run
// returns a *MemoryError.
func Run(ctx context.Context, c Capture) error {
	profile, err := os.MkdirTemp("", "archiveflow-chrome-")
	if err != nil {
		return fmt.Errorf("create chromium profile dir: %w", err)
	}
	defer os.RemoveAll(profile)

	args := BaseArgs(profile)
	if c.UserAgent != "" {
		args = append(args, "--user-agent="+c.UserAgent)
	}
	if c.Proxy != "" {
		args = append(args, ProxyArgs(c.Proxy)...)
	}
	args = append(args, c.Extra...)
	args = append(args, c.Flag, c.URL)

	// Files, not pipes: Chromium's helper processes inherit stdio and may
	// outlive the browser process for a moment.
	stderr, err := os.Create(filepath.Join(profile, "chromium.stderr.log"))
	if err != nil {
		return fmt.Errorf("create chromium log: %w", err)
	}
	defer stderr.Close()
	runCtx, stop := context.WithCancel(ctx)
	defer stop()
	cmd := exec.CommandContext(runCtx, c.Binary, args...)
	cmd.Stdout = c.Stdout
	cmd.Stderr = stderr
	cmd.Env = append(os.Environ(), "HOME="+profile)
	cmd.Cancel = func() error { return cmd.Process.Signal(syscall.SIGTERM) }
	cmd.WaitDelay = c.Grace
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("chromium %s: %w", c.Flag, err)
	}
	if c.Memory.Limit <= 0 {
		err = cmd.Wait()
	} else {
		watch := newMemoryWatch(c.Memory, cmd.Process.Pid)
		done, watched := make(chan struct{}), make(chan struct{})
		go func() {
			defer close(watched)
			watch.run(done, func() { watch.killAll(); stop() })
		}()
		err = cmd.Wait()
		close(done)
		<-watched
		watch.endRest()
		if err != nil {
			merr := watch.stopped()
			if merr == nil && ctx.Err() == nil {
				// Chromium ended on its own: a process the limit ended
				// since the last look may be why.
				merr = watch.verdict()
			}
			if merr != nil {
				return merr
			}
		}
	}
	if err != nil {
		if ctx.Err() != nil {
			return fmt.Errorf("chromium %s: %w", c.Flag, ctx.Err())
		}
		return fmt.Errorf("chromium %s: %w; stderr: %s", c.Flag, err, tail(stderr.Name()))
	}
	return loadFailure(stderr.Name())
}

// LoadError is a capture whose page did not load: Chromium exited 0 but
// said on stderr that the navigation failed, and captured nothing of the
// page (or its own error page, which the origin never sent).
type LoadError struct {
	Net string // Chromium's net error, e.g. net::ERR_CONNECTION_REFUSED
}

func (e *LoadError) Error() string { return "the page did not load: " + e.Net }

// pageLoadFailed is the line headless Chromium's command handler logs when
// the page's navigation fails.
var pageLoadFailed = regexp.MustCompile(`Page load failed: (net::ERR_[A-Z0-9_]+)`)

// loadFailure is a *LoadError when Chromium's log at path says the page
// did not load, else nil.
func loadFailure(path string) error {
	b, err := os.ReadFile(path)
	if err != nil {
		return fmt.Errorf("read chromium log: %w", err)
	}
	m := pageLoadFailed.FindAllSubmatch(b, -1)
	if len(m) == 0 {
		return nil
	}
	return &LoadError{Net: string(m[len(m)-1][1])}
}

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
