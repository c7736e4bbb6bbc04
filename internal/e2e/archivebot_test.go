//go:build dev

package e2e

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.temporal.io/api/workflowservice/v1"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest"

	"github.com/archiveflow/archiveflow/config"
	"github.com/archiveflow/archiveflow/internal/abbot"
	"github.com/archiveflow/archiveflow/internal/abpipeline"
	"github.com/archiveflow/archiveflow/internal/backend"
	"github.com/archiveflow/archiveflow/internal/model"
	"github.com/archiveflow/archiveflow/internal/rkeys"
	"github.com/archiveflow/archiveflow/workflows"
)

// runsHook records each run's arguments (one line per run) in $E2E_EVENTS.
const runsHook = `echo "$*" >> "$E2E_EVENTS"
echo '{"type":"ArchiveResult","status":"succeeded","output_str":"ok"}'
`

// archiveBotPool makes the stack's pool an ArchiveBot pipeline with fast
// timings.
func archiveBotPool(nick string, maxJobs int) func(*config.Config) {
	return func(c *config.Config) {
		c.Pools[0].ArchiveBot = &config.ArchiveBotPool{Nickname: nick}
		c.ArchiveBot.PollInterval = 100 * time.Millisecond
		c.ArchiveBot.ClaimLease = 2 * time.Second
		c.ArchiveBot.WatchInterval = 500 * time.Millisecond
		c.ArchiveBot.MaxJobs = maxJobs
	}
}

// runsOf counts the runs of each ident in the events file.
func runsOf(t *testing.T, events string, idents []string) map[string]int {
	t.Helper()
	b, err := os.ReadFile(events)
	if errors.Is(err, os.ErrNotExist) {
		b = nil
	} else {
		require.NoError(t, err)
	}
	out := map[string]int{}
	for _, line := range strings.Split(string(b), "\n") {
		for _, id := range idents {
			if strings.Contains(line, "--snapshot-id="+id) {
				out[id]++
			}
		}
	}
	return out
}

// workflowRuns counts the workflow executions Temporal has of each ident
// on the stack's task queue (every run, whatever its status).
func workflowRuns(t *testing.T, s *Stack, idents []string) map[string]int {
	t.Helper()
	want := map[string]bool{}
	for _, id := range idents {
		want[id] = true
	}
	out := map[string]int{}
	var token []byte
	for {
		// Every queue: a job claimed from a named bot queue runs on its
		// pipeline's tag queue (TASKQUEUE#NICK).
		resp, err := s.Client.ListWorkflow(context.Background(), &workflowservice.ListWorkflowExecutionsRequest{
			Query:         fmt.Sprintf(`TaskQueue = %q OR TaskQueue STARTS_WITH %q`, s.Config.Pools[0].TaskQueue, s.Config.Pools[0].TaskQueue+"#"),
			NextPageToken: token,
		})
		require.NoError(t, err)
		for _, e := range resp.GetExecutions() {
			if id := e.GetExecution().GetWorkflowId(); want[id] {
				out[id]++
			}
		}
		if token = resp.GetNextPageToken(); len(token) == 0 {
			return out
		}
	}
}

// onceEach is idents mapped to 1.
func onceEach(idents ...string) map[string]int {
	out := map[string]int{}
	for _, id := range idents {
		out[id] = 1
	}
	return out
}

// startPipeline runs an ArchiveBot pipeline for the stack's pool in this
// process, on its own Redis connection, until the test ends.
func startPipeline(t *testing.T, s *Stack, pipelineID string, runner abpipeline.Runner) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	log := zaptest.NewLogger(t, zaptest.Level(zap.DebugLevel))
	rdb, store, err := backend.OpenRedis(ctx, s.Config, log)
	require.NoError(t, err)
	pool := s.Config.Pools[0]
	if runner == nil {
		runner = &abpipeline.TemporalRunner{Config: s.Config, Client: s.Client, Pool: pool}
	}
	ab := s.Config.ArchiveBot
	p, err := abpipeline.New(store, runner, abpipeline.Options{
		Nickname: abpipeline.Nickname(s.Config, pool), AOOnly: pool.ArchiveBot.AOOnly, Large: pool.ArchiveBot.Large,
		PipelineID: pipelineID, TaskQueue: pool.TaskQueue, MaxJobs: ab.MaxJobs,
		PollInterval: ab.PollInterval, ClaimLease: ab.ClaimLease, WatchInterval: ab.WatchInterval,
	}, log)
	require.NoError(t, err)
	done := make(chan struct{})
	go func() { defer close(done); _ = p.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		<-done
		_ = rdb.Close()
	})
}

// jobsCounter reads jobs_completed / jobs_aborted / jobs_failed.
func jobsCounter(t *testing.T, s *Stack, key string) int {
	t.Helper()
	n, err := s.Redis.Get(context.Background(), key).Int()
	if err != nil {
		return 0
	}
	return n
}

// TestArchiveBotTwoWorkerProcessesRace: two worker processes, both
// ArchiveBot pipelines, race for 100 jobs the bot queued: every job runs
// exactly once and finishes with ArchiveBot's finish keys.
func TestArchiveBotTwoWorkerProcessesRace(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the workers binary")
	}
	bin := BuildWorkers(t)
	root := t.TempDir()
	events := filepath.Join(t.TempDir(), "events")
	writeHook(t, root, "runs", "on_Snapshot__10_runs.sh", runsHook)
	s := NewStack(t, server, root, archiveBotPool("racer", 8))
	abEnv := []string{
		"E2E_EVENTS=" + events,
		"ARCHIVEFLOW_ARCHIVEBOT_POLL_INTERVAL=100ms",
		"ARCHIVEFLOW_ARCHIVEBOT_MAX_JOBS=8",
		"ARCHIVEFLOW_ARCHIVEBOT_CLAIM_LEASE=5s",
	}
	ctx := context.Background()
	bot := abbot.Bot{Redis: s.Redis}
	const n = 100
	var idents []string
	for i := range n {
		o := abbot.Options{Shallow: true}
		switch i % 4 {
		case 1:
			o = abbot.Options{Shallow: true, Pipeline: "racer"}
		case 2:
			o = abbot.Options{Shallow: true, Pipeline: "someone-else"}
		}
		j, err := bot.Queue(ctx, fmt.Sprintf("http://127.0.0.1:1/race/%d", i), o)
		require.NoError(t, err)
		if i%4 != 2 {
			idents = append(idents, j.Ident)
		}
	}
	StartWorker(t, bin, s.Config, "w1", abEnv...)
	StartWorker(t, bin, s.Config, "w2", abEnv...)

	require.Eventually(t, func() bool { return jobsCounter(t, s, "jobs_completed") >= len(idents) },
		10*time.Minute, 200*time.Millisecond, "every served job finishes")
	// Every job has exactly one workflow run (visibility may lag a little).
	var runs map[string]int
	assert.Eventually(t, func() bool {
		runs = workflowRuns(t, s, idents)
		return len(runs) == len(idents)
	}, 30*time.Second, 200*time.Millisecond, "Temporal lists every job")
	assert.Equal(t, onceEach(idents...), runs, "one workflow run per job")
	hooks := runsOf(t, events, idents)
	for _, id := range idents {
		// A hook may run again inside its one workflow (an activity retry
		// on this loaded machine); it ran at least once.
		assert.GreaterOrEqual(t, hooks[id], 1, "job %s's hook ran", id)
	}
	assert.Equal(t, len(idents), jobsCounter(t, s, "jobs_completed"))
	notes, err := s.Redis.LLen(ctx, "finish_notifications").Result()
	require.NoError(t, err)
	assert.EqualValues(t, len(idents), notes)
	working, err := s.Redis.LLen(ctx, "working").Result()
	require.NoError(t, err)
	assert.Zero(t, working)
	other, err := s.Redis.LLen(ctx, "pending:someone-else").Result()
	require.NoError(t, err)
	assert.EqualValues(t, n/4, other, "a named queue for another pipeline is left alone")
	leases, err := s.Redis.ZCard(ctx, "pipeline-claims").Result()
	require.NoError(t, err)
	assert.Zero(t, leases)
}

// countingRunner counts the workflows a Runner started.
type countingRunner struct {
	abpipeline.Runner
	mu     sync.Mutex
	starts map[string]int
}

func (r *countingRunner) Start(ctx context.Context, j abpipeline.Job) (abpipeline.Run, error) {
	run, err := r.Runner.Start(ctx, j)
	if err == nil {
		r.mu.Lock()
		r.starts[j.Ident]++
		r.mu.Unlock()
	}
	return run, err
}

// TestArchiveBotClaimerKilledAfterClaim: a pipeline that dies right after
// moving a job to working (before or after starting its workflow) loses
// nothing: the lease ends and the job is either adopted (its workflow runs)
// or put back into its queue and run by another pipeline, once.
func TestArchiveBotClaimerKilledAfterClaim(t *testing.T) {
	root := t.TempDir()
	events := filepath.Join(t.TempDir(), "events")
	writeHook(t, root, "runs", "on_Snapshot__10_runs.sh", runsHook)
	s := NewStack(t, server, root, archiveBotPool("survivor", 4))
	s.StartPools(t, hookEnv(events))
	ctx := context.Background()
	bot := abbot.Bot{Redis: s.Redis}
	pool := s.Config.Pools[0]
	temporal := &abpipeline.TemporalRunner{Config: s.Config, Client: s.Client, Pool: pool}

	// Died before starting: the job sits in working with a lease.
	before, err := bot.Queue(ctx, "http://127.0.0.1:1/died-before-start", abbot.Options{Shallow: true})
	require.NoError(t, err)
	c, err := s.Store.ClaimBotJob(ctx, rkeys.ClaimRequest{Queues: []string{rkeys.QueuePendingAO},
		PipelineID: "dead", TaskQueue: pool.TaskQueue, Token: "dead-1", Lease: time.Second})
	require.NoError(t, err)
	require.Equal(t, before.Ident, c.Ident)

	// Died after starting, before confirming: the workflow runs.
	after, err := bot.Queue(ctx, "http://127.0.0.1:1/died-after-start", abbot.Options{Shallow: true})
	require.NoError(t, err)
	c, err = s.Store.ClaimBotJob(ctx, rkeys.ClaimRequest{Queues: []string{rkeys.QueuePendingAO},
		PipelineID: "dead", TaskQueue: pool.TaskQueue, Token: "dead-2", Lease: time.Second})
	require.NoError(t, err)
	require.Equal(t, after.Ident, c.Ident)
	v, err := s.Store.GetJob(ctx, after.Ident)
	require.NoError(t, err)
	job, _, err := abpipeline.JobFromView(v)
	require.NoError(t, err)
	_, err = temporal.Start(ctx, job)
	require.NoError(t, err)

	counting := &countingRunner{Runner: temporal, starts: map[string]int{}}
	startPipeline(t, s, "survivor1", counting)

	idents := []string{before.Ident, after.Ident}
	require.Eventually(t, func() bool { return jobsCounter(t, s, "jobs_completed") == 2 },
		90*time.Second, 100*time.Millisecond, "both jobs finish")
	require.Eventually(t, func() bool { return len(workflowRuns(t, s, idents)) == 2 },
		30*time.Second, 100*time.Millisecond, "Temporal lists both jobs")
	assert.Equal(t, onceEach(idents...), workflowRuns(t, s, idents), "each job ran once")
	counting.mu.Lock()
	assert.Equal(t, map[string]int{before.Ident: 1}, counting.starts,
		"only the job whose workflow never started was started again")
	counting.mu.Unlock()
	leases, err := s.Redis.ZCard(ctx, "pipeline-claims").Result()
	require.NoError(t, err)
	assert.Zero(t, leases)
}

// assertJobFields asserts fields of the job's hash and returns the hash.
func assertJobFields(t *testing.T, s *Stack, ident string, want map[string]string) map[string]string {
	t.Helper()
	h, err := s.Redis.HGetAll(context.Background(), ident).Result()
	require.NoError(t, err)
	for field, v := range want {
		assert.Equal(t, v, h[field], "job %s's %s", ident, field)
	}
	return h
}

// abSite is a small site of linked pages for the bot's `!a` crawls; it
// records the path and User-Agent of every request.
type abSite struct {
	*httptest.Server
	mu   sync.Mutex
	reqs []string // "PATH UA"
}

func newABSite(t *testing.T) *abSite {
	t.Helper()
	links := map[string][]string{"/": {"/a", "/b"}, "/a": {"/c", "/"}, "/b": {"/a"}, "/c": nil}
	site := &abSite{}
	site.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		site.mu.Lock()
		site.reqs = append(site.reqs, r.URL.Path+" "+r.UserAgent())
		site.mu.Unlock()
		out, ok := links[r.URL.Path]
		if !ok {
			http.NotFound(w, r)
			return
		}
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		_, _ = fmt.Fprintf(w, "<html><head><title>page %s</title></head><body>", r.URL.Path)
		for _, l := range out {
			_, _ = fmt.Fprintf(w, "<a href=%q>%s</a> ", l, l)
		}
		_, _ = fmt.Fprint(w, "</body></html>")
	}))
	t.Cleanup(site.Close)
	return site
}

// requests are the "PATH UA" of every request so far.
func (s *abSite) requests() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.reqs)
}

// TestArchiveBotDropIn drives a real redis-server as ArchiveBot's bot does
// and checks that archiveflow obeys: jobs queued into pending, pending-ao
// and a named queue are claimed once and started with the bot's settings;
// an `!a` job is crawled (CrawlWorkflow) with the bot's user agent and
// ignores and counted as ArchiveBot counts; a raised settings_age (new
// concurrency, new ignore pattern) reaches a running crawl; !abort ends it
// with ArchiveBot's finished-job keys.
func TestArchiveBotDropIn(t *testing.T) {
	site := newABSite(t)
	// The crawls' pages run the built-in page plugins; snapshots (and a
	// crawl's start page) run the recording hook, which on the site's
	// start page finds the links with the built-in outlinks.
	root := builtinPlugins(t, "pagefetch", "title", "outlinks")
	events := filepath.Join(t.TempDir(), "events")
	writeHook(t, root, "runs", "on_Snapshot__10_runs.sh", `echo "$*" >> "$E2E_EVENTS"
case "$*" in
*slow*) sleep 120;;
*"$E2E_SITE/"*) exec "$ARCHIVEFLOW_BIN" hook outlinks "$@";;
esac
echo '{"type":"Response","url":"http://127.0.0.1:1/page","status":200,"bytes":100}'
echo '{"type":"Response","url":"http://127.0.0.1:1/gone","status":404,"bytes":10}'
echo '{"type":"ArchiveResult","status":"succeeded","output_str":"ok"}'
`)
	s := NewStack(t, server, root, func(c *config.Config) {
		archiveBotPool("dropin", 4)(c)
		c.Hooks.Timeout = 5 * time.Minute
		// Snapshots run the recording hook only; crawl pages enable
		// their page plugins themselves.
		c.Plugins.Values = map[string]any{"TITLE_ENABLED": false, "OUTLINKS_ENABLED": false}
	})
	s.StartPools(t, append(builtinEnv(t), "E2E_EVENTS="+events, "E2E_SITE="+site.URL))
	ctx := context.Background()
	bot := abbot.Bot{Redis: s.Redis}

	const slowUA, siteUA = "ArchiveTeam ArchiveBot/20250101 (slow)", "ArchiveTeam ArchiveBot/20250101 (site)"
	slow, err := bot.Queue(ctx, "http://127.0.0.1:1/slow", abbot.Options{UserAgent: slowUA})
	require.NoError(t, err)
	require.NoError(t, bot.AddIgnore(ctx, slow.Ident, `\.gif$`))
	named, err := bot.Queue(ctx, "http://127.0.0.1:1/named", abbot.Options{Shallow: true, Pipeline: "dropin"})
	require.NoError(t, err)
	rec, err := bot.Queue(ctx, site.URL+"/", abbot.Options{UserAgent: siteUA})
	require.NoError(t, err)
	require.NoError(t, bot.AddIgnore(ctx, rec.Ident, `/b$`))

	startPipeline(t, s, "dropin1", nil)
	startPipeline(t, s, "dropin2", nil)

	// The named job and the site's crawl finish; the slow crawl stays
	// running.
	state := func(ident string) string { return s.Redis.HGet(ctx, ident, "state").Val() }
	require.Eventually(t, func() bool { return state(named.Ident) == "finished" },
		60*time.Second, 50*time.Millisecond, "the named-queue job finishes")
	require.Eventually(t, func() bool {
		return runsOf(t, events, []string{slow.Ident})[slow.Ident] == 1
	}, 60*time.Second, 50*time.Millisecond, "the slow crawl's start page runs")

	// Counters and packets as ArchiveBot's layout defines them
	// (docs/redis-layout.md, "Counters"): items_downloaded the 2xx/3xx,
	// error_count the 4xx and 5xx; read by !status, queued is 0.
	nh := assertJobFields(t, s, named.Ident, map[string]string{"items_downloaded": "1", "items_queued": "1", "r2xx": "1",
		"r4xx": "1", "r5xx": "0", "runk": "0", "error_count": "1", "state": "finished"})
	nf, err := bot.JobFigures(ctx, named.Ident)
	require.NoError(t, err)
	assert.Equal(t, int64(1), nf.Errors, "!status: the 404 is an error")
	assert.Zero(t, nf.Queued, "!status: nothing queued")
	assert.NotEmpty(t, nh["finished_at"])
	assert.NotContains(t, nh, "aborted")
	nlog, err := s.Store.ReadLog(ctx, named.Ident, 0, 100)
	require.NoError(t, err)
	var downloads []string
	for _, e := range nlog {
		if e.Packet.Type == rkeys.PacketDownload {
			downloads = append(downloads, fmt.Sprintf("%s %d %v %v", e.Packet.URL, e.Packet.ResponseCode, e.Packet.IsError, e.Packet.IsWarning))
		}
	}
	assert.ElementsMatch(t, []string{"http://127.0.0.1:1/page 200 false false", "http://127.0.0.1:1/gone 404 true true"}, downloads)
	status := func() workflows.CrawlStatus {
		val, err := s.Client.QueryWorkflow(ctx, slow.Ident, "", workflows.QueryStatus)
		require.NoError(t, err)
		var st workflows.CrawlStatus
		require.NoError(t, val.Get(&st))
		return st
	}
	st := status()
	h, err := s.Redis.HGetAll(ctx, slow.Ident).Result()
	require.NoError(t, err)
	startAge, err := strconv.ParseInt(h["settings_age"], 10, 64)
	require.NoError(t, err)
	assert.Equal(t, "crawl", st.Kind, "fetch_depth inf is a crawl")
	assert.Equal(t, -1, st.MaxDepth, "ArchiveBot's !a has no depth limit")
	assert.Equal(t, model.Settings{Concurrency: 3, DelayMinMS: 250, DelayMaxMS: 375,
		UserAgent: slowUA, Ignores: []string{`\.gif$`}, BotOwned: true, BotAge: startAge}, st.Settings,
		"started with the bot's settings, at their settings_age")
	assert.Equal(t, "active", h["state"])
	assert.True(t, strings.HasPrefix(h["pipeline_id"], "pipeline:"))
	assert.NotEmpty(t, h["started_at"])

	// fetch_depth inf (!a): the site is crawled with the bot's user agent,
	// its ignore pattern keeps /b out, and the counters are ArchiveBot's:
	// items_downloaded = the 2xx responses of / /a /c, items_queued the
	// same once every page is done (queued 0 in !status).
	require.Eventually(t, func() bool { return state(rec.Ident) == "finished" },
		90*time.Second, 50*time.Millisecond, "the site's crawl finishes")
	assert.ElementsMatch(t, []string{"/ " + siteUA, "/a " + siteUA, "/c " + siteUA}, site.requests(),
		"each page within scope fetched once with the bot's user agent, the ignored one not at all")
	rh := assertJobFields(t, s, rec.Ident, map[string]string{"items_downloaded": "3", "items_queued": "3", "r2xx": "3",
		"r4xx": "0", "r5xx": "0", "runk": "0", "error_count": "0", "fetch_depth": "inf"})
	assert.NotEmpty(t, rh["finished_at"])
	rf, err := bot.JobFigures(ctx, rec.Ident)
	require.NoError(t, err)
	assert.Zero(t, rf.Queued, "!status: nothing queued at the end")
	assert.Zero(t, rf.Errors)
	rlog, err := s.Store.ReadLog(ctx, rec.Ident, 0, 1000)
	require.NoError(t, err)
	var fetched, ignored []string
	for _, e := range rlog {
		switch e.Packet.Type {
		case rkeys.PacketDownload:
			fetched = append(fetched, fmt.Sprintf("%s %d", e.Packet.URL, e.Packet.ResponseCode))
		case rkeys.PacketIgnore:
			ignored = append(ignored, e.Packet.URL)
		}
	}
	assert.ElementsMatch(t, []string{site.URL + "/ 200", site.URL + "/a 200", site.URL + "/c 200"}, fetched)
	assert.Equal(t, []string{site.URL + "/b"}, ignored, "the ignored page is reported as ArchiveBot does")

	// !con 5 and !ig: the running crawl gets them.
	sent := time.Now()
	require.NoError(t, bot.SetConcurrency(ctx, slow.Ident, 5))
	require.NoError(t, bot.AddIgnore(ctx, slow.Ident, `^https?://ads\.`))
	var applied time.Duration
	require.Eventually(t, func() bool {
		last := status().Settings
		if last.Concurrency == 5 && len(last.Ignores) == 2 {
			applied = time.Since(sent)
			return true
		}
		return false
	}, 10*time.Second, 5*time.Millisecond, "the bot's change reaches the running crawl")
	t.Logf("bot settings change applied by the workflow after %s", applied)
	assert.Equal(t, []string{`\.gif$`, `^https?://ads\.`}, status().Settings.Ignores)
	age, err := s.Redis.HGet(ctx, slow.Ident, "settings_age").Int()
	require.NoError(t, err)
	assert.Equal(t, 5, age, "the workflow's write-back changed nothing the bot wrote")

	// The running job's heartbeat moves, as ArchiveBot's reaper expects.
	hb := func() int {
		n, _ := s.Redis.HGet(ctx, slow.Ident, "heartbeat").Int()
		return n
	}
	first := hb()
	require.Eventually(t, func() bool { return hb() > first }, 30*time.Second, 50*time.Millisecond, "heartbeat moves")
	assert.Equal(t, []string{`\.gif$`, `^https?://ads\.`}, status().Settings.Ignores,
		"no pipeline's older read of the bot's hash undid the change")

	// !abort: the job ends aborted, ArchiveBot's way.
	require.NoError(t, bot.Abort(ctx, slow.Ident))
	require.Eventually(t, func() bool { return jobsCounter(t, s, "jobs_aborted") == 1 },
		30*time.Second, 50*time.Millisecond, "the abort ends the crawl")
	h, err = s.Redis.HGetAll(ctx, slow.Ident).Result()
	require.NoError(t, err)
	assert.Equal(t, "true", h["aborted"])
	assert.Equal(t, "aborted", h["state"])
	assert.NotEmpty(t, h["finished_at"])
	ttl, err := s.Redis.TTL(ctx, slow.Ident).Result()
	require.NoError(t, err)
	assert.Greater(t, ttl, time.Duration(0))
	assert.LessOrEqual(t, ttl, 5*time.Second, "aborted jobs expire after 5 s, as ArchiveBot's")
	working, err := s.Redis.LRange(ctx, "working", 0, -1).Result()
	require.NoError(t, err)
	assert.NotContains(t, working, slow.Ident)
	notes, err := s.Redis.LRange(ctx, "finish_notifications", 0, -1).Result()
	require.NoError(t, err)
	var abortedNote map[string]any
	for _, n := range notes {
		var m map[string]any
		require.NoError(t, json.Unmarshal([]byte(n), &m))
		if m["ident"] == slow.Ident {
			abortedNote = m
		}
	}
	require.NotNil(t, abortedNote, "a finish notification for the aborted job")
	assert.Equal(t, true, abortedNote["aborted"])
	assert.Equal(t, "archivist", abortedNote["started_by"])
	assert.Equal(t, "#archivebot", abortedNote["started_in"])

	assert.Equal(t, 2, jobsCounter(t, s, "jobs_completed"), "the named job and the site's crawl")

	// Claimed once each.
	all := []string{slow.Ident, named.Ident, rec.Ident}
	require.Eventually(t, func() bool { return len(workflowRuns(t, s, all)) == 3 },
		30*time.Second, 100*time.Millisecond, "Temporal lists every job")
	assert.Equal(t, onceEach(all...), workflowRuns(t, s, all), "one run each")
}
