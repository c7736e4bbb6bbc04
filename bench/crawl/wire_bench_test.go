//go:build dev && bench

package crawl

import (
	"cmp"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"maps"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/archiveflow/archiveflow/bench/benchkit"
	"github.com/archiveflow/archiveflow/config"
	"github.com/archiveflow/archiveflow/internal/e2e"
	"github.com/archiveflow/archiveflow/internal/freeport"
	"github.com/archiveflow/archiveflow/internal/model"
	"github.com/archiveflow/archiveflow/internal/submit"
	"github.com/archiveflow/archiveflow/workflows"
)

var (
	wirePages  = flag.Int("wirepages", 2000, "BenchmarkWire: pages of the static site")
	wireRounds = flag.Int("wirerounds", 2, "BenchmarkWire: rounds of wget, concurrency 1 and concurrency 8, alternating")
	wireServer = flag.String("wireserver", "auto", "BenchmarkWire's site server: nginx, go (this binary, a file server in its own process) or auto (nginx when on PATH)")
)

// envStatic makes this test binary serve a directory (BenchmarkWire's
// site) instead of running tests.
const envStatic = "BENCHCRAWL_STATIC_DIR"

// wireConcurrencies are the job concurrencies issue 26's targets name.
var wireConcurrencies = []int{1, 8}

// writeStaticSite writes n pages: / and /p/1.html … /p/(n-1).html, each
// with a title, six links to other pages (page i+1 among them, so every
// page is reachable from /), a paragraph of text, and the shared
// /style.css and /logo.png every page uses.
func writeStaticSite(dir string, n int) error {
	if err := os.MkdirAll(filepath.Join(dir, "p"), 0o755); err != nil {
		return err
	}
	page := func(i int) string { return fmt.Sprintf("/p/%d.html", i) }
	text := strings.Repeat("Archived for the record, page after page. ", 40)
	for i := range n {
		var b strings.Builder
		fmt.Fprintf(&b, "<!doctype html>\n<html><head><meta charset=\"utf-8\"><title>Page %d</title>\n<link rel=\"stylesheet\" href=\"/style.css\"></head>\n<body><img src=\"/logo.png\" alt=\"logo\"><h1>Page %d</h1><p>%s</p><ul>\n", i, i, text)
		for _, j := range []int{i + 1, 2*i + 1, 3*i + 7, i*i + 3, i + n/2, 13*i + 5} {
			j %= n
			if j == 0 {
				j = 1
			}
			fmt.Fprintf(&b, "<li><a href=\"%s\">page %d</a></li>\n", page(j), j)
		}
		b.WriteString("</ul></body></html>\n")
		name := filepath.Join(dir, "p", fmt.Sprintf("%d.html", i))
		if i == 0 {
			name = filepath.Join(dir, "index.html")
		}
		if err := os.WriteFile(name, []byte(b.String()), 0o644); err != nil {
			return err
		}
	}
	if err := os.WriteFile(filepath.Join(dir, "style.css"), []byte("body { font-family: serif; margin: 2em }\nh1 { color: #333 }\n"), 0o644); err != nil {
		return err
	}
	// A 1x1 PNG.
	png := []byte{0x89, 'P', 'N', 'G', '\r', '\n', 0x1a, '\n', 0, 0, 0, 13, 'I', 'H', 'D', 'R', 0, 0, 0, 1, 0, 0, 0, 1, 8, 6, 0, 0, 0,
		0x1f, 0x15, 0xc4, 0x89, 0, 0, 0, 13, 'I', 'D', 'A', 'T', 0x78, 0x9c, 0x63, 0xf8, 0xcf, 0xc0, 0xf0, 0x1f, 0, 0x05, 0, 0x01,
		0xff, 0x89, 0x99, 0x3d, 0x1d, 0, 0, 0, 0, 'I', 'E', 'N', 'D', 0xae, 0x42, 0x60, 0x82}
	return os.WriteFile(filepath.Join(dir, "logo.png"), png, 0o644)
}

// serveStatic serves dir on a free loopback port, prints its siteInfo and
// serves until stdin closes.
func serveStatic(dir string) error {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	srv := &http.Server{Handler: http.FileServer(http.Dir(dir)), ReadHeaderTimeout: time.Minute}
	go func() { _ = srv.Serve(ln) }()
	defer func() { _ = srv.Close() }()
	if err := json.NewEncoder(os.Stdout).Encode(siteInfo{Start: "http://" + ln.Addr().String() + "/"}); err != nil {
		return err
	}
	_, _ = os.Stdin.Read(make([]byte, 1))
	return nil
}

// startStatic serves dir with nginx (one process: master_process off) or
// with this binary, and returns the server's process and start URL.
func startStatic(b *testing.B, dir, server string) (*exec.Cmd, string) {
	b.Helper()
	if server == "nginx" {
		port, err := freeport.Port("127.0.0.1")
		require.NoError(b, err)
		run := b.TempDir()
		conf := fmt.Sprintf(`daemon off; master_process off; worker_processes 1; pid %[1]s/nginx.pid; error_log %[1]s/error.log;
events { worker_connections 1024; }
http { access_log off; keepalive_requests 100000;
  types { text/html html; text/css css; image/png png; }
  client_body_temp_path %[1]s; proxy_temp_path %[1]s; fastcgi_temp_path %[1]s; uwsgi_temp_path %[1]s; scgi_temp_path %[1]s;
  server { listen 127.0.0.1:%[2]d; root %[3]s; index index.html; } }
`, run, port, dir)
		require.NoError(b, os.WriteFile(filepath.Join(run, "nginx.conf"), []byte(conf), 0o644))
		cmd := exec.Command("nginx", "-p", run, "-c", filepath.Join(run, "nginx.conf"))
		cmd.Stderr = os.Stderr
		require.NoError(b, cmd.Start())
		b.Cleanup(func() {
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
		})
		start := fmt.Sprintf("http://127.0.0.1:%d/", port)
		deadline := time.Now().Add(10 * time.Second)
		for {
			resp, err := http.Get(start)
			if err == nil {
				_ = resp.Body.Close()
				return cmd, start
			}
			require.True(b, time.Now().Before(deadline), "nginx never answered: %v", err)
			time.Sleep(20 * time.Millisecond)
		}
	}
	cmd, info := startSelf(b, envStatic+"="+dir)
	return cmd, info.Start
}

// wireRun is one crawl of the static site by one crawler.
type wireRun struct {
	crawler  string
	wall     time.Duration
	cpu      map[string]time.Duration // by process
	events   int                      // Temporal history events (archiveflow)
	reads    int64                    // Redis read events: round trips (archiveflow)
	commands int64                    // Redis commands (archiveflow)
	byName   map[string]int64         // Redis commands by name (archiveflow: INFO commandstats)
	probe    time.Duration            // benchkit.Probe, the mean of before and after
	sys      time.Duration            // the kernel's part of cpu
	ownSys   time.Duration            // the kernel's part of the crawler's own process (wget, worker)
	own      string                   // which process of cpu is the crawler's own
}

// probed runs crawl between two machine-speed probes (benchkit.Probe) and
// keeps their mean in its run.
func probed(crawl func() wireRun) wireRun {
	p0 := benchkit.Probe()
	r := crawl()
	r.probe = (p0 + benchkit.Probe()) / 2
	return r
}

func (r wireRun) totalCPU() time.Duration {
	var t time.Duration
	for _, d := range r.cpu {
		t += d
	}
	return t
}

// wgetOnce crawls the site with GNU wget -r -l inf -p --warc-file.
func wgetOnce(b *testing.B, dir, server string) wireRun {
	site, start := startStatic(b, dir, server)
	site0, err := benchkit.ReadProc(site.Process.Pid)
	require.NoError(b, err)
	out := b.TempDir()
	cmd := exec.Command("wget", "-r", "-l", "inf", "-p", "-q", "--warc-file="+filepath.Join(out, "wget"), "-P", out, start)
	t0 := time.Now()
	msg, err := cmd.CombinedOutput()
	wall := time.Since(t0)
	require.NoError(b, err, "wget: %s", msg)
	site1, err := benchkit.ReadProc(site.Process.Pid)
	require.NoError(b, err)
	n, err := filepath.Glob(filepath.Join(out, "*", "p", "*.html"))
	require.NoError(b, err)
	require.Len(b, n, *wirePages-1, "wget fetched every page but /")
	return wireRun{crawler: "wget", wall: wall, cpu: map[string]time.Duration{
		"wget": cmd.ProcessState.UserTime() + cmd.ProcessState.SystemTime(),
		"site": site1.CPU - site0.CPU,
	}, sys: cmd.ProcessState.SystemTime() + site1.Sys - site0.Sys, ownSys: cmd.ProcessState.SystemTime(), own: "wget"}
}

// archiveflowOnce crawls the site with archiveflow at job concurrency conc.
func archiveflowOnce(b *testing.B, st *e2e.Stack, worker *exec.Cmd, dir, server string, conc int) wireRun {
	ctx := context.Background()
	site, start := startStatic(b, dir, server)
	rs0, err := benchkit.ReadRedisStats(ctx, st.Redis)
	require.NoError(b, err)
	cpu0 := cpuOf(b, []*exec.Cmd{worker}, site.Process.Pid, rs0.PID)
	calls0 := commandCalls(b, st)
	t0 := time.Now()
	job := st.SubmitCrawl(b, start, -1, func(r *submit.Request) {
		r.Settings.UserAgent = crawlUA
		r.Settings.Concurrency = conc
	})
	firstRun := job.Run.GetRunID()
	wctx, cancel := context.WithTimeout(ctx, crawlTimeout)
	defer cancel()
	var status workflows.CrawlStatus
	require.NoError(b, job.Run.Get(wctx, &status))
	wall := time.Since(t0)
	rs1, err := benchkit.ReadRedisStats(ctx, st.Redis)
	require.NoError(b, err)
	cpu := cpuOf(b, []*exec.Cmd{worker}, site.Process.Pid, rs0.PID).sub(cpu0)
	require.Equal(b, model.StateFinished, status.State, status.Error)
	require.GreaterOrEqual(b, status.Counts.Done, int64(*wirePages), "every page done: %+v", status.Counts)
	r := wireRun{crawler: fmt.Sprintf("archiveflow c=%d", conc), wall: wall, cpu: map[string]time.Duration{
		"temporal+bench": cpu.server, "worker": cpu.workers, "hooks": cpu.hooks, "site": cpu.site, "redis": cpu.redis,
	}, sys: cpu.sys, ownSys: cpu.workerSys, own: "worker"}
	rd := rs1.Sub(rs0)
	r.reads, r.commands = rd.Reads, rd.Commands
	r.byName = commandCalls(b, st)
	for name, n := range calls0 {
		r.byName[name] -= n
	}
	for runID := firstRun; runID != ""; {
		events := history(b, st.Client, job.Ident, runID)
		r.events += len(events)
		runID = ""
		for _, ev := range events {
			if a := ev.GetWorkflowExecutionContinuedAsNewEventAttributes(); a != nil {
				runID = a.GetNewExecutionRunId()
			}
		}
	}
	r.events += len(history(b, st.Client, job.Ident+"/seed", ""))
	return r
}

// BenchmarkWire is issue 26's acceptance bench (see the package doc): the
// same static site crawled by wget -r and by archiveflow at job
// concurrency 1 and 8, alternating, in one run.
func BenchmarkWire(b *testing.B) {
	if _, err := exec.LookPath("wget"); err != nil {
		b.Skip("BenchmarkWire compares with GNU wget: none on PATH")
	}
	server := *wireServer
	if server == "auto" {
		server = "go"
		if _, err := exec.LookPath("nginx"); err == nil {
			server = "nginx"
		}
	}
	require.Contains(b, []string{"nginx", "go"}, server, "-wireserver")
	dir := b.TempDir()
	require.NoError(b, writeStaticSite(dir, *wirePages))
	bin := e2e.BuildWorkers(b)
	root, err := filepath.Abs(filepath.Join("..", "..", "plugins"))
	require.NoError(b, err)
	plugins := b.TempDir()
	for _, p := range config.Default().Crawl.PagePlugins {
		require.NoError(b, os.Symlink(filepath.Join(root, p), filepath.Join(plugins, p)))
	}
	maxConc := slices.Max(wireConcurrencies)
	// The default politeness machinery (crawl.per_host on: every fetch
	// takes its host's turn), with the one host's concurrency the job's
	// and no delay, so the budget itself never holds the crawl back.
	st := e2e.NewStack(b, e2e.SharedServer(b), plugins, func(c *config.Config) {
		c.Pools[0].Slots = maxConc
		c.Job.Concurrency = maxConc
		c.Crawl.PerHost.Enabled = true
		c.Crawl.PerHost.Concurrency = maxConc
		c.Crawl.PerHost.Delay = 0
	})
	worker := e2e.StartWorker(b, bin, st.Config, "w1", "ARCHIVEFLOW_LOG_LEVEL=warn", "PAGEFETCH_ENABLED=true",
		"ARCHIVEFLOW_CRAWL_PER_HOST_ENABLED=true", fmt.Sprintf("ARCHIVEFLOW_CRAWL_PER_HOST_CONCURRENCY=%d", maxConc), "ARCHIVEFLOW_CRAWL_PER_HOST_DELAY=0s")
	var runs []wireRun
	b.ResetTimer()
	for range *wireRounds {
		runs = append(runs, probed(func() wireRun { return wgetOnce(b, dir, server) }))
		for _, c := range wireConcurrencies {
			runs = append(runs, probed(func() wireRun { return archiveflowOnce(b, st, worker, dir, server, c) }))
		}
	}
	b.StopTimer()
	reportWire(b, runs, server)
}

// topCommands names the commands most called, per page, most first.
func topCommands(byName map[string]int64, pages float64) string {
	names := slices.Collect(maps.Keys(byName))
	slices.SortFunc(names, func(a, b string) int { return cmp.Or(cmp.Compare(byName[b], byName[a]), cmp.Compare(a, b)) })
	var parts []string
	for _, name := range names[:min(len(names), 8)] {
		if byName[name] > 0 {
			parts = append(parts, fmt.Sprintf("%s %.2f", name, float64(byName[name])/pages))
		}
	}
	return strings.Join(parts, ", ")
}

func reportWire(b *testing.B, runs []wireRun, server string) {
	n := float64(*wirePages)
	load, _ := os.ReadFile("/proc/loadavg")
	fmt.Printf("BenchmarkWire: %d-page static site served by %s, %d rounds, %d cores, crawl.per_host on (concurrency %d, no delay); load %s\n",
		*wirePages, server, *wireRounds, runtime.NumCPU(), slices.Max(wireConcurrencies), strings.TrimSpace(string(load)))
	med := map[string][]float64{}
	for _, r := range runs {
		rate := n / r.wall.Seconds()
		cpu := benchkit.Millis(r.totalCPU()) / n
		var parts []string
		for _, k := range slices.Sorted(func(yield func(string) bool) {
			for k := range r.cpu {
				if !yield(k) {
					return
				}
			}
		}) {
			parts = append(parts, fmt.Sprintf("%s %.2f", k, benchkit.Millis(r.cpu[k])/n))
		}
		fmt.Printf("  %-16s %7.1f pages/s, CPU %.2f ms/page (%s), %.2f cores busy, probe %.1f ms", r.crawler, rate, cpu, strings.Join(parts, ", "), r.totalCPU().Seconds()/r.wall.Seconds(), benchkit.Millis(r.probe))
		fmt.Printf(", kernel %.0f%% of CPU (%s: %.2f of its %.2f ms/page)", 100*r.sys.Seconds()/r.totalCPU().Seconds(), r.own, benchkit.Millis(r.ownSys)/n, benchkit.Millis(r.cpu[r.own])/n)
		if r.crawler != "wget" {
			fmt.Printf(", %.3f history events/page, %.2f Redis round trips/page (%.2f commands: %s)", float64(r.events)/n, float64(r.reads)/n, float64(r.commands)/n, topCommands(r.byName, n))
		}
		fmt.Println()
		med[r.crawler+" rate"] = append(med[r.crawler+" rate"], rate)
		med[r.crawler+" cpu"] = append(med[r.crawler+" cpu"], cpu)
	}
	m := func(k string) float64 { return benchkit.Quantile(med[k], 0.5) }
	for _, c := range wireConcurrencies {
		name := fmt.Sprintf("archiveflow c=%d", c)
		fmt.Printf("medians: %s %.1f pages/s = %.3f× wget's %.1f; CPU %.2f ms/page = %.2f× wget's %.2f\n",
			name, m(name+" rate"), m(name+" rate")/m("wget rate"), m("wget rate"), m(name+" cpu"), m(name+" cpu")/m("wget cpu"), m("wget cpu"))
	}
}
