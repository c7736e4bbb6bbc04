//go:build dev && bench

package crawl

import (
	"bufio"
	"cmp"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	enumspb "go.temporal.io/api/enums/v1"
	historypb "go.temporal.io/api/history/v1"
	"go.temporal.io/sdk/client"

	"github.com/archiveflow/archiveflow/bench/benchkit"
	"github.com/archiveflow/archiveflow/config"
	"github.com/archiveflow/archiveflow/internal/e2e"
	"github.com/archiveflow/archiveflow/internal/frontier"
	"github.com/archiveflow/archiveflow/internal/model"
	"github.com/archiveflow/archiveflow/internal/scope"
	"github.com/archiveflow/archiveflow/internal/submit"
	"github.com/archiveflow/archiveflow/internal/testredis"
	"github.com/archiveflow/archiveflow/internal/testsite"
	"github.com/archiveflow/archiveflow/workflows"
)

var (
	pages  = flag.Int("pages", 5000, "pages of the generated site")
	slots  = flag.Int("slots", 16, "slots of each worker process (the job's concurrency is all of them)")
	budget = flag.Int("historyevents", 0, "crawl.history_events (0: the default)")
	polite = flag.String("politeness", "off", "BenchmarkCrawl's host budget: off (crawl.per_host.enabled false) or high (on, a per-host concurrency of 1,000,000)")
	rounds = flag.Int("rounds", 3, "BenchmarkCrawlPoliteness: crawls with politeness off and high, alternating")
)

// politenessEnv configures the worker processes' host budget: off, or on
// with a per-host limit no crawl reaches (its cost alone).
func politenessEnv(b *testing.B, mode string) string {
	switch mode {
	case "off":
		return "ARCHIVEFLOW_CRAWL_PER_HOST_ENABLED=false"
	case "high":
		return "ARCHIVEFLOW_CRAWL_PER_HOST_CONCURRENCY=1000000"
	}
	b.Fatalf("-politeness %q: must be off or high", mode)
	return ""
}

const (
	// envSite makes this test binary serve the generated site of that many
	// pages instead of running tests (the site's CPU is then its own).
	envSite      = "BENCHCRAWL_SITE_PAGES"
	crawlTimeout = 30 * time.Minute
	crawlUA      = "archiveflow-bench-crawl"
)

// siteInfo is what the site process prints once it serves.
type siteInfo struct {
	Start    string `json:"start"`
	Skip     string `json:"skip"`
	Expected int    `json:"expected"`
}

func TestMain(m *testing.M) {
	if dir := os.Getenv(envStatic); dir != "" {
		if err := serveStatic(dir); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	if v := os.Getenv(envSite); v != "" {
		if err := serveSite(v); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	code := m.Run()
	e2e.RemoveBuilds()
	os.Exit(code)
}

// serveSite generates the site, serves it, prints its siteInfo and serves
// until stdin closes.
func serveSite(n string) error {
	var size int
	if _, err := fmt.Sscan(n, &size); err != nil {
		return fmt.Errorf("%s=%q: must be a page count: %w", envSite, n, err)
	}
	site, err := testsite.Generate(testsite.Config{Seed: testsite.AcceptanceConfig.Seed, Pages: size})
	if err != nil {
		return err
	}
	srv, err := testsite.Start(site, testsite.Options{})
	if err != nil {
		return err
	}
	defer func() { _ = srv.Close() }()
	skip, err := srv.CalendarSkipPattern(6)
	if err != nil {
		return err
	}
	want, err := srv.Expected(testsite.Scope{MaxDepth: testsite.Unlimited, OffsiteOnce: true, Skip: []string{skip}})
	if err != nil {
		return err
	}
	if err := json.NewEncoder(os.Stdout).Encode(siteInfo{Start: srv.StartURL(), Skip: skip, Expected: len(want.Pages)}); err != nil {
		return err
	}
	_, _ = bufio.NewReader(os.Stdin).ReadString(0) // until the bench closes stdin
	return nil
}

// startSite runs this test binary as the site's server.
func startSite(b *testing.B) (*exec.Cmd, siteInfo) {
	return startSelf(b, fmt.Sprintf("%s=%d", envSite, *pages))
}

// startSelf runs this test binary as a site's server with env set and
// reads the siteInfo it prints; the server stops when the bench ends.
func startSelf(b *testing.B, env string) (*exec.Cmd, siteInfo) {
	b.Helper()
	self, err := os.Executable()
	require.NoError(b, err)
	cmd := exec.Command(self)
	cmd.Env = append(os.Environ(), env)
	stdin, err := cmd.StdinPipe()
	require.NoError(b, err)
	stdout, err := cmd.StdoutPipe()
	require.NoError(b, err)
	cmd.Stderr = os.Stderr
	require.NoError(b, cmd.Start())
	b.Cleanup(func() {
		_ = stdin.Close()
		_ = cmd.Wait()
	})
	var info siteInfo
	require.NoError(b, json.NewDecoder(stdout).Decode(&info), "the site process's address")
	return cmd, info
}

// BenchmarkCrawl crawls the generated site with 1, 2 and 4 worker
// processes (see the package doc).
func BenchmarkCrawl(b *testing.B) {
	bin := e2e.BuildWorkers(b)
	root, err := filepath.Abs(filepath.Join("..", "..", "plugins"))
	require.NoError(b, err)
	for _, n := range []int{1, 2, 4} {
		b.Run(fmt.Sprintf("workers=%d", n), func(b *testing.B) { benchCrawl(b, bin, root, n, *polite) })
	}
}

// BenchmarkCrawlPoliteness is issue 28's overhead of the host budget: the
// same crawl by 2 worker processes with politeness off and on with a
// per-host limit no crawl reaches (the budget's Redis calls per fetch and
// the claim's host checks, without ever waiting), alternating -rounds
// times in one run on a fresh stack each. It logs the ratio of the
// medians (pages/s and CPU per page, on/off).
func BenchmarkCrawlPoliteness(b *testing.B) {
	bin := e2e.BuildWorkers(b)
	root, err := filepath.Abs(filepath.Join("..", "..", "plugins"))
	require.NoError(b, err)
	got := map[string][]measure{}
	for r := range *rounds {
		for _, mode := range []string{"off", "high"} {
			b.Run(fmt.Sprintf("round=%d/politeness=%s", r+1, mode), func(b *testing.B) {
				ms := benchCrawl(b, bin, root, 2, mode)
				got[mode] = append(got[mode], ms...)
			})
		}
	}
	rate := func(m measure) float64 { return float64(m.pages-1) / m.wall.Seconds() }
	cpu := func(m measure) float64 { return benchkit.Millis(m.cpu.total()) / float64(m.pages) }
	median := func(ms []measure, f func(measure) float64) float64 {
		var v []float64
		for _, m := range ms {
			v = append(v, f(m))
		}
		slices.Sort(v)
		if len(v) == 0 {
			return 0
		}
		return v[len(v)/2]
	}
	off, on := got["off"], got["high"]
	// A parent of sub-benchmarks prints no log of its own: stdout.
	fmt.Printf("politeness off: pages/s %v, CPU ms/page %v\n", each(off, rate), each(off, cpu))
	fmt.Printf("politeness on (high limit): pages/s %v, CPU ms/page %v\n", each(on, rate), each(on, cpu))
	fmt.Printf("medians: %.1f vs %.1f pages/s (on/off %.3f), %.2f vs %.2f CPU ms/page (on/off %.3f)",
		median(on, rate), median(off, rate), median(on, rate)/median(off, rate),
		median(on, cpu), median(off, cpu), median(on, cpu)/median(off, cpu))
	fmt.Println()
}

func each(ms []measure, f func(measure) float64) []string {
	var out []string
	for _, m := range ms {
		out = append(out, fmt.Sprintf("%.1f", f(m)))
	}
	return out
}

// cpuSplit is the CPU spent so far by each part of the stack; sys is the
// kernel's part of it in every process but the hooks, workerSys the
// worker's own.
type cpuSplit struct{ server, workers, hooks, site, redis, sys, workerSys time.Duration }

func (c cpuSplit) sub(o cpuSplit) cpuSplit {
	return cpuSplit{c.server - o.server, c.workers - o.workers, c.hooks - o.hooks, c.site - o.site, c.redis - o.redis, c.sys - o.sys, c.workerSys - o.workerSys}
}

func (c cpuSplit) add(o cpuSplit) cpuSplit {
	return cpuSplit{c.server + o.server, c.workers + o.workers, c.hooks + o.hooks, c.site + o.site, c.redis + o.redis, c.sys + o.sys, c.workerSys + o.workerSys}
}

func (c cpuSplit) total() time.Duration { return c.server + c.workers + c.hooks + c.site + c.redis }

// measure is what one crawl did and cost.
type measure struct {
	pages    int64         // pages done (the start page included)
	urls     int64         // discovered URLs (every page of the frontier)
	wall     time.Duration // first RunPage scheduled → crawl closed
	all      time.Duration // submit → crawl closed
	cpu      cpuSplit      // submit → crawl closed
	events   benchkit.EventCounts
	runs     int
	maxRun   int // the longest run's events
	seedEvts int
	usedMem  int64 // INFO used_memory delta
	frontMem int64 // MEMORY USAGE of the frontier's keys
	byKey    map[string]int64
	// Redis requests: every command its clients sent (a script's own
	// calls included: total_commands_processed), and the scripts among
	// them (EVALSHA and EVAL: one round trip each).
	redisCmds, redisScripts int64
}

func benchCrawl(b *testing.B, bin, pluginRoot string, workers int, politeness string) []measure {
	// The default page plugin set, and for the start page every plugin of
	// the same three (the shipped wrappers; the worker binary runs them).
	plugins := b.TempDir()
	for _, p := range config.Default().Crawl.PagePlugins {
		require.NoError(b, os.Symlink(filepath.Join(pluginRoot, p), filepath.Join(plugins, p)))
	}
	st := e2e.NewStack(b, e2e.SharedServer(b), plugins, func(c *config.Config) {
		c.Pools[0].Slots = *slots
		c.Job.Concurrency = *slots * workers
		if *budget > 0 {
			c.Crawl.HistoryEvents = *budget
		}
	})
	procs := make([]*exec.Cmd, workers)
	for i := range procs {
		procs[i] = e2e.StartWorker(b, bin, st.Config, fmt.Sprintf("w%d", i+1), "ARCHIVEFLOW_LOG_LEVEL=warn", "PAGEFETCH_ENABLED=true",
			politenessEnv(b, politeness))
	}
	var ms []measure
	b.ResetTimer()
	for range b.N {
		ms = append(ms, crawlOnce(b, st, procs))
	}
	b.StopTimer()
	report(b, workers, ms)
	return ms
}

// crawlOnce crawls the site to the end (unlimited depth, the calendar
// contained by a skip rule) and reads what it cost.
func crawlOnce(b *testing.B, st *e2e.Stack, procs []*exec.Cmd) measure {
	ctx := context.Background()
	// A site of its own (a free port: a distinct start URL, so a distinct
	// job) for each crawl.
	b.StopTimer()
	site, info := startSite(b)
	b.StartTimer()
	rs, err := benchkit.ReadRedisStats(ctx, st.Redis)
	require.NoError(b, err)
	mem0, err := testredis.UsedMemory(ctx, st.Redis)
	require.NoError(b, err)
	cpu0 := cpuOf(b, procs, site.Process.Pid, rs.PID)
	scripts0 := scriptCalls(b, st)
	t0 := time.Now()
	job := st.SubmitCrawl(b, info.Start, -1 /* no depth limit */, func(r *submit.Request) {
		r.Settings.UserAgent = crawlUA
		r.Rules = scope.Rules{{Pattern: info.Skip, Skip: scope.Bool(true)}}
	})
	firstRun := job.Run.GetRunID() // Get follows continue-as-new and moves it on
	wctx, cancel := context.WithTimeout(ctx, crawlTimeout)
	defer cancel()
	var status workflows.CrawlStatus
	require.NoError(b, job.Run.Get(wctx, &status))
	m := measure{all: time.Since(t0)}
	m.cpu = cpuOf(b, procs, site.Process.Pid, rs.PID).sub(cpu0)
	rs1, err := benchkit.ReadRedisStats(ctx, st.Redis)
	require.NoError(b, err)
	m.redisCmds, m.redisScripts = rs1.Commands-rs.Commands, scriptCalls(b, st)-scripts0
	require.Equal(b, model.StateFinished, status.State, status.Error)
	m.pages, m.urls = status.Counts.Done, status.Counts.Total
	mem1, err := testredis.UsedMemory(ctx, st.Redis)
	require.NoError(b, err)
	m.usedMem = mem1 - mem0
	f, err := frontier.New(st.Redis, st.Store.Keys(), frontier.Options{})
	require.NoError(b, err)
	m.frontMem, _, err = benchkit.FrontierMemory(ctx, st.Redis, f, job.Ident)
	require.NoError(b, err)
	m.byKey = keyMemory(b, st, job.Ident)

	// Every run of the crawl, following continue-as-new.
	var first, end time.Time
	for runID := firstRun; runID != ""; {
		events := history(b, st.Client, job.Ident, runID)
		m.events.Add(events)
		m.runs++
		m.maxRun = max(m.maxRun, len(events))
		runID = ""
		for _, ev := range events {
			if first.IsZero() && ev.GetEventType() == enumspb.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED &&
				strings.HasPrefix(ev.GetActivityTaskScheduledEventAttributes().GetActivityType().GetName(), "RunPage") {
				first = ev.GetEventTime().AsTime()
			}
			if a := ev.GetWorkflowExecutionContinuedAsNewEventAttributes(); a != nil {
				runID = a.GetNewExecutionRunId()
			}
			end = ev.GetEventTime().AsTime()
		}
	}
	require.False(b, first.IsZero(), "no RunPage in the crawl's history")
	m.wall = end.Sub(first)
	m.seedEvts = len(history(b, st.Client, job.Ident+"/seed", ""))
	b.Logf("crawl %s: %d pages done of %d URLs (%+v; the site expects %d fetched), %d runs, wall %s (%s with the start page)",
		job.Ident, m.pages, m.urls, status.Counts, info.Expected, m.runs, m.wall.Round(time.Millisecond), m.all.Round(time.Millisecond))
	return m
}

// scriptCalls reads how many EVALSHA and EVAL calls the stack's Redis
// served (INFO commandstats).
func scriptCalls(b *testing.B, st *e2e.Stack) int64 {
	calls := commandCalls(b, st)
	return calls["evalsha"] + calls["eval"]
}

// commandCalls reads how many calls of each command the stack's Redis
// served (testredis.CommandCalls).
func commandCalls(b *testing.B, st *e2e.Stack) map[string]int64 {
	b.Helper()
	calls, err := testredis.CommandCalls(context.Background(), st.Redis)
	require.NoError(b, err)
	return calls
}

// keyMemory sums MEMORY USAGE over every key of the stack's Redis (its
// own redis-server: every key is this benchmark's), grouped by name with
// the job's ident written IDENT and anything after the first ':' dropped.
func keyMemory(b *testing.B, st *e2e.Stack, ident string) map[string]int64 {
	b.Helper()
	ctx := context.Background()
	out := map[string]int64{}
	it := st.Redis.Scan(ctx, 0, "*", 1000).Iterator()
	for it.Next(ctx) {
		n, err := st.Redis.MemoryUsage(ctx, it.Val(), 0).Result()
		if err != nil {
			continue // expired meanwhile
		}
		name, _, _ := strings.Cut(strings.ReplaceAll(it.Val(), ident, "IDENT"), ":")
		out[name] += n
	}
	require.NoError(b, it.Err())
	return out
}

func history(b *testing.B, c client.Client, id, runID string) []*historypb.HistoryEvent {
	b.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	events, err := benchkit.History(ctx, c, id, runID)
	require.NoError(b, err)
	return events
}

// cpuOf reads the CPU spent so far by this process (the Temporal server
// and the bench client), the worker processes, the hooks they reaped, the
// site process and the Redis server.
func cpuOf(b *testing.B, workers []*exec.Cmd, sitePID, redisPID int) cpuSplit {
	b.Helper()
	read := func(pid int) benchkit.ProcStat {
		ps, err := benchkit.ReadProc(pid)
		require.NoError(b, err)
		return ps
	}
	server, site, rds := read(os.Getpid()), read(sitePID), read(redisPID)
	c := cpuSplit{server: server.CPU, site: site.CPU, redis: rds.CPU, sys: server.Sys + site.Sys + rds.Sys}
	for _, w := range workers {
		ps := read(w.Process.Pid)
		c.workers += ps.CPU
		c.hooks += ps.ChildCPU
		c.sys += ps.Sys
		c.workerSys += ps.Sys
	}
	return c
}

func report(b *testing.B, workers int, ms []measure) {
	t := measure{byKey: map[string]int64{}}
	for _, m := range ms {
		t.pages += m.pages
		t.urls += m.urls
		t.wall += m.wall
		t.all += m.all
		t.cpu = t.cpu.add(m.cpu)
		t.runs += m.runs
		t.maxRun = max(t.maxRun, m.maxRun)
		t.seedEvts += m.seedEvts
		t.usedMem += m.usedMem
		t.frontMem += m.frontMem
		t.redisCmds += m.redisCmds
		t.redisScripts += m.redisScripts
		for k, v := range m.byKey {
			t.byKey[k] += v
		}
		t.events.Merge(m.events)
	}
	n := float64(t.pages)
	// The pages after the start page, over the time from the first one's
	// scheduling to the crawl's end.
	rate := float64(t.pages-int64(len(ms))) / t.wall.Seconds()
	perPage := func(d time.Duration) float64 { return benchkit.Millis(d) / n }
	load, _ := os.ReadFile("/proc/loadavg")
	b.ReportMetric(rate, "pages/s")
	b.ReportMetric(perPage(t.cpu.server), "ms-server/page")
	b.ReportMetric(perPage(t.cpu.workers), "ms-worker/page")
	b.ReportMetric(perPage(t.cpu.site), "ms-site/page")
	b.ReportMetric(perPage(t.cpu.redis), "ms-redis/page")
	b.ReportMetric(float64(t.events.Events)/n, "events/page")
	b.ReportMetric(float64(t.usedMem)/float64(t.urls), "used_memory-bytes/url")
	b.ReportMetric(float64(t.frontMem)/float64(t.urls), "frontier-bytes/url")
	b.ReportMetric(float64(t.redisCmds)/n, "redis-cmds/page")
	b.ReportMetric(float64(t.redisScripts)/n, "redis-scripts/page")
	b.Logf("%d worker process(es) × %d slots, concurrency %d, %d crawl(s); load %s", workers, *slots, *slots*workers, len(ms), strings.TrimSpace(string(load)))
	b.Logf("%.1f pages/s (%d pages in %s; %.1f/s from submit, start page included); CPU ms per page: Temporal server+bench %.2f, workers %.2f, start-page hooks %.2f, site %.2f, redis %.2f, total %.2f = %.2f cores over the wall",
		rate, t.pages, t.wall.Round(time.Millisecond), n/t.all.Seconds(), perPage(t.cpu.server), perPage(t.cpu.workers), perPage(t.cpu.hooks),
		perPage(t.cpu.site), perPage(t.cpu.redis), perPage(t.cpu.total()), t.cpu.total().Seconds()/t.all.Seconds())
	b.Logf("history: %d runs (longest %d events), %.2f events and %.2f workflow tasks per page (seed child: %d events): %s",
		t.runs, t.maxRun, float64(t.events.Events)/n, float64(t.events.WorkflowTasks)/n, t.seedEvts, t.events.PerUnit(n))
	b.Logf("Redis: %.1f bytes of used_memory per discovered URL (%d URLs), %.1f of them the frontier's keys",
		float64(t.usedMem)/float64(t.urls), t.urls, float64(t.frontMem)/float64(t.urls))
	names := slices.Collect(maps.Keys(t.byKey))
	slices.SortFunc(names, func(x, y string) int { return cmp.Compare(t.byKey[y], t.byKey[x]) })
	parts := make([]string, len(names))
	for i, k := range names {
		parts[i] = fmt.Sprintf("%s %.1f", k, float64(t.byKey[k])/float64(t.urls))
	}
	b.Logf("Redis MEMORY USAGE per discovered URL by key: %s", strings.Join(parts, ", "))
}
