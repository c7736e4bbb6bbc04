//go:build dev

package e2e

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/zap"

	"github.com/archiveflow/archiveflow/config"
	"github.com/archiveflow/archiveflow/internal/backend"
	"github.com/archiveflow/archiveflow/internal/frontier"
	"github.com/archiveflow/archiveflow/internal/ident"
	"github.com/archiveflow/archiveflow/internal/rkeys"
	"github.com/archiveflow/archiveflow/internal/scope"
	"github.com/archiveflow/archiveflow/internal/testsite"
)

// TestDrillCrawlStackKilled is issue 30's crash drill: a crawl under the
// embedded stack (`starter dev URL --keep`, one process holding the
// Temporal server, the worker pools and its redis-server child) is
// SIGKILLed as a whole mid-crawl and started again on the same data dir.
// The crawl must reach its final state soon after its last page is done:
// the teardown on the killed process's host queue, whose pipeline record
// still looks alive for up to worker.pipeline_ttl after the kill, waits no
// longer than that record's lease instead of job.host_timeout (2 min).
// Every page has the same final result as in a run of the same site
// without the crash, and the counters are equal (requireSameCounters: a
// requisite counts once per crawl however often it is fetched again; only
// a 500 answer to a page attempt the kill cut short may be missing).
// Nothing of either stack is left running.
func TestDrillCrawlStackKilled(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the dev starter and crawls twice on it")
	}
	bin := buildDevStarter(t)
	srv := crawlSite(t, drillSite)
	rules := crawlRulesFile(t, srv)

	want := devCrawl(t, bin, srv, rules, false)
	got := devCrawl(t, bin, srv, rules, true)

	for name, o := range map[string]devCrawlRun{"without the crash": want, "with the crash": got} {
		t.Logf("%s: last page done → %s in %s; items_queued %d, items_downloaded %d, bytes_downloaded %d, responses %+v, pages %+v, requisite URLs %d",
			name, o.job.State, o.finalAfter.Round(time.Millisecond), o.job.ItemsQueued, o.job.ItemsDownloaded,
			o.job.BytesDownloaded, o.job.Responses, o.counts.StateCounts, len(o.fetched.Requisites))
	}
	require.Equal(t, "finished", string(got.job.State))
	assert.Less(t, got.finalAfter, 30*time.Second, "the crawl's final state came too long after its last page was done")
	assert.Equal(t, finals(want.pages), finals(got.pages), "every page has the same final result")
	assert.Equal(t, want.counts.StateCounts, got.counts.StateCounts, "page counts")
	requireSameCounters(t, want.job, got.job, cutShort(got.requests, got.killedAt))
}

// devCrawlRun is what one crawl on the dev stack left, and how long its
// final state took once its last page was done.
type devCrawlRun struct {
	job        rkeys.JobView
	counts     frontier.Counts
	fetched    *testsite.Fetched
	pages      []frontier.Page
	finalAfter time.Duration
	requests   []testsite.Request // the site's log of the crawl's requests
	killedAt   time.Time          // when the stack was killed (zero: never)
}

// devCrawl crawls srv to drillDepth with `starter dev URL --keep` on a
// fresh data dir. With crash, the whole stack is SIGKILLed (its process
// group: the starter and its redis-server) once drillFaultAt pages are
// done, and `starter dev --keep` is started again on the same data dir to
// finish the crawl. Every process is gone when it returns.
func devCrawl(t *testing.T, bin string, srv *testsite.Server, rules string, crash bool) devCrawlRun {
	t.Helper()
	srv.Reset()
	mark := srv.RequestCount()
	id, _, err := ident.FromURL(srv.StartURL())
	require.NoError(t, err)
	data := t.TempDir()
	d := startDev(t, bin, data, srv.StartURL(), "--depth", strconv.Itoa(drillDepth), "--rules", rules,
		"--user-agent", crawlUA, "--concurrency", "4")
	w := d.watch(t, id)
	var killedAt time.Time
	if crash {
		w.until(t, "pages done", func(c frontier.Counts, _ rkeys.JobView) bool { return c.Done >= drillFaultAt })
		killedAt = time.Now()
		d.kill(t)
		killed := time.Now()
		d = startDev(t, bin, data)
		t.Logf("stack SIGKILLed after %d pages done; started again in %s", drillFaultAt, time.Since(killed).Round(time.Millisecond))
		w = d.watch(t, id)
	}
	var lastDone time.Time
	w.until(t, "the final state", func(c frontier.Counts, j rkeys.JobView) bool {
		if lastDone.IsZero() && c.Total > 0 && c.Finished() {
			lastDone = time.Now()
		}
		return j.Final()
	})
	out := devCrawlRun{job: w.job, counts: w.counts, finalAfter: time.Since(lastDone), killedAt: killedAt}
	if lastDone.IsZero() {
		out.finalAfter = 0
	}
	out.pages = frontierPages(t, w.f, id)
	out.requests = crawlRequests(srv.RequestsSince(mark))
	out.fetched = testsite.Requested(out.requests, nil)
	d.stop(t)
	return out
}

// buildDevStarter builds the starter with the dev tag (the embedded
// stack), once per test binary (BuildCommand).
func buildDevStarter(t *testing.T) string {
	t.Helper()
	return BuildCommand(t, "github.com/archiveflow/archiveflow/starter", "-tags", "dev")
}

// crawlRulesFile writes the drills' rules (the calendar skipped past six
// months either side) for `--rules`.
func crawlRulesFile(t *testing.T, srv *testsite.Server) string {
	t.Helper()
	skip, err := srv.CalendarSkipPattern(6)
	require.NoError(t, err)
	b, err := json.Marshal(scope.Rules{{Pattern: skip, Skip: scope.Bool(true)}})
	require.NoError(t, err)
	path := filepath.Join(t.TempDir(), "rules.json")
	require.NoError(t, os.WriteFile(path, b, 0o644))
	return path
}

// devProc is one `starter dev --keep` process, in a process group of its
// own with its redis-server child.
type devProc struct {
	cmd      *exec.Cmd
	out      *syncBuffer
	data     string
	redisURL string
	exited   chan struct{}
}

var redisURLLine = regexp.MustCompile(`redis://127\.0\.0\.1:\d+/0`)

// startDev runs `starter dev [args] --keep` on data with free ports and
// waits until it printed its Redis address.
func startDev(t *testing.T, bin, data string, args ...string) *devProc {
	t.Helper()
	args = append([]string{"dev"}, args...)
	args = append(args, "--keep", "--data-dir", data, "--port", "0", "--ui-port", "-1", "--redis-port", "0")
	cmd := exec.Command(bin, args...)
	cmd.Dir = data
	cmd.Env = []string{
		"PATH=" + os.Getenv("PATH"), "HOME=" + os.Getenv("HOME"), "LANG=C.UTF-8", "TMPDIR=" + os.TempDir(),
		"CHROME_BINARY=/nonexistent/chromium", "PAGEFETCH_ENABLED=true",
	}
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	d := &devProc{cmd: cmd, out: &syncBuffer{}, data: data, exited: make(chan struct{})}
	cmd.Stdout, cmd.Stderr = d.out, d.out
	require.NoError(t, cmd.Start())
	go func() {
		_ = cmd.Wait()
		close(d.exited)
	}()
	t.Cleanup(func() {
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		<-d.exited
		if t.Failed() {
			log, _ := os.ReadFile(filepath.Join(data, "logs", "dev.log"))
			if len(log) > 40000 {
				log = log[len(log)-40000:]
			}
			t.Logf("starter dev (pid %d) output:\n%s\ndev.log tail:\n%s", cmd.Process.Pid, d.out, log)
		}
	})
	require.Eventually(t, func() bool {
		select {
		case <-d.exited:
			return true
		default:
		}
		d.redisURL = redisURLLine.FindString(d.out.String())
		return d.redisURL != ""
	}, drillDeadline, 20*time.Millisecond, "starter dev printed no Redis address")
	select {
	case <-d.exited:
		t.Fatalf("starter dev exited at start: %s", d.out)
	default:
	}
	return d
}

// kill SIGKILLs the stack's process group and waits until none of its
// processes is left.
func (d *devProc) kill(t *testing.T) {
	t.Helper()
	require.NoError(t, syscall.Kill(-d.cmd.Process.Pid, syscall.SIGKILL))
	<-d.exited
	requireNoProcessUnder(t, d.data)
}

// stop ends the stack as Ctrl-C does and waits until none of its
// processes is left.
func (d *devProc) stop(t *testing.T) {
	t.Helper()
	require.NoError(t, d.cmd.Process.Signal(syscall.SIGINT))
	select {
	case <-d.exited:
	case <-time.After(drillDeadline):
		t.Fatalf("starter dev did not stop within %s", drillDeadline)
	}
	requireNoProcessUnder(t, d.data)
}

// requireNoProcessUnder waits until no process runs in dir or names it on
// its command line (the starter, its redis-server, hook processes).
func requireNoProcessUnder(t *testing.T, dir string) {
	t.Helper()
	var left []string
	require.Eventually(t, func() bool {
		left = processesUnder(dir)
		return len(left) == 0
	}, drillDeadline, 50*time.Millisecond, "processes of the stack left: %v", left)
}

// processesUnder lists live processes working in dir or below, or naming
// it in their command line.
func processesUnder(dir string) []string {
	entries, _ := os.ReadDir("/proc")
	var out []string
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == os.Getpid() {
			continue
		}
		p := filepath.Join("/proc", e.Name())
		if st, err := os.ReadFile(filepath.Join(p, "stat")); err != nil || zombieStat(string(st)) {
			continue
		}
		cmdline, _ := os.ReadFile(filepath.Join(p, "cmdline"))
		cwd, _ := os.Readlink(filepath.Join(p, "cwd"))
		line := strings.ReplaceAll(string(cmdline), "\x00", " ")
		if strings.Contains(line, dir) || cwd == dir || strings.HasPrefix(cwd, dir+"/") {
			out = append(out, fmt.Sprintf("pid %d: %s (cwd %s)", pid, strings.TrimSpace(line), cwd))
		}
	}
	return out
}

// zombieStat reports a /proc/PID/stat line of a zombie or dead process.
func zombieStat(stat string) bool {
	i := strings.LastIndexByte(stat, ')')
	if i < 0 || i+2 >= len(stat) {
		return true
	}
	return stat[i+2] == 'Z' || stat[i+2] == 'X'
}

// devWatch reads a crawl's frontier and job hash from the stack's Redis.
type devWatch struct {
	f      *frontier.Frontier
	store  *rkeys.Store
	ident  string
	job    rkeys.JobView
	counts frontier.Counts
}

func (d *devProc) watch(t *testing.T, id string) *devWatch {
	t.Helper()
	cfg := config.Default()
	cfg.Redis.URL = d.redisURL
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	rdb, store, err := backend.OpenRedis(ctx, &cfg, zap.NewNop())
	require.NoError(t, err)
	t.Cleanup(func() { _ = rdb.Close() })
	f, err := frontier.New(rdb, store.Keys(), frontier.Options{})
	require.NoError(t, err)
	return &devWatch{f: f, store: store, ident: id}
}

// until polls the crawl until done says so.
func (w *devWatch) until(t *testing.T, what string, done func(frontier.Counts, rkeys.JobView) bool) {
	t.Helper()
	require.Eventually(t, func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		j, err := w.store.GetJob(ctx, w.ident)
		if err != nil {
			return false
		}
		c, err := w.f.Counts(ctx, w.ident)
		if err != nil && !errors.Is(err, frontier.ErrNoFrontier) {
			return false
		}
		w.job, w.counts = j, c
		return done(c, j)
	}, drillDeadline, 50*time.Millisecond, "crawl %s never reached %s", w.ident, what)
}
