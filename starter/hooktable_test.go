package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/mock"
	"github.com/stretchr/testify/require"
	commonpb "go.temporal.io/api/common/v1"
	workflowpb "go.temporal.io/api/workflow/v1"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/mocks"
	"go.temporal.io/sdk/temporal"
	"go.uber.org/zap"

	"github.com/archiveflow/archiveflow/activities"
	"github.com/archiveflow/archiveflow/config"
	"github.com/archiveflow/archiveflow/internal/backend"
	"github.com/archiveflow/archiveflow/internal/frontier"
	"github.com/archiveflow/archiveflow/internal/ident"
	"github.com/archiveflow/archiveflow/internal/model"
	"github.com/archiveflow/archiveflow/internal/rkeys"
	"github.com/archiveflow/archiveflow/internal/testredis"
	"github.com/archiveflow/archiveflow/workflows"
)

var t0 = time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)

func doneHook(plugin, hook string, step int, r model.ArchiveResult) workflows.HookStatus {
	return workflows.HookStatus{Plugin: plugin, Hook: hook, Step: step, Phase: workflows.PhaseDone, Result: &r}
}

// sampleStatus is a running job with one hook of every kind of outcome.
func sampleStatus() workflows.Status {
	chromeless := "screenshot needs Chromium: no Chromium found: none of chromium, chromium-browser is on PATH (install chromium or set CHROME_BINARY)"
	return workflows.Status{Ident: "abc", State: model.StateActive, Hooks: []workflows.HookStatus{
		doneHook("headers", "on_Snapshot__20_headers.sh", 2, model.ArchiveResult{Status: model.StatusSucceeded, Attempts: 1,
			OutputStr: "HTTP 200", StartedAt: t0, EndedAt: t0.Add(260 * time.Millisecond), OutputBytes: 631}),
		doneHook("screenshot", "on_Snapshot__50_screenshot.sh", 5, model.ArchiveResult{Status: model.StatusSkipped, Attempts: 1,
			OutputStr: chromeless, StartedAt: t0, EndedAt: t0.Add(10 * time.Millisecond)}),
		doneHook("pdf", "on_Snapshot__51_pdf.sh", 5, model.ArchiveResult{Status: model.StatusSkipped, Attempts: 1,
			OutputStr: strings.Replace(chromeless, "screenshot", "pdf", 1), StartedAt: t0, EndedAt: t0}),
		doneHook("wget", "on_Snapshot__60_wget.bg.sh", 6, model.ArchiveResult{Status: model.StatusFailed, Attempts: 3,
			Error: "wget exited 4:\nnetwork failure\x1b[31m red", StartedAt: t0, EndedAt: t0.Add(125 * time.Second)}),
		doneHook("title", "on_Snapshot__53_title.sh", 5, model.ArchiveResult{Status: model.StatusSkipped,
			OutputStr: "disabled by configuration", StartedAt: t0, EndedAt: t0}),
		{Plugin: "index", Hook: "on_Snapshot__95_index.sh", Step: 9, Phase: workflows.PhaseRunning},
		{Plugin: "index", Hook: "on_Snapshot__96_index_extra.sh", Step: 9, Phase: workflows.PhasePending},
	}}
}

func TestHookRowsCarryEveryResultField(t *testing.T) {
	rows := hookRows(sampleStatus())
	require.Len(t, rows, 7)
	assert.Equal(t, hookRow{Step: 2, Plugin: "headers", Hook: "on_Snapshot__20_headers.sh", Phase: workflows.PhaseDone,
		Status: model.StatusSucceeded, Attempts: 1, DurationMS: 260, Bytes: 631, Output: "HTTP 200"}, rows[0])
	assert.Contains(t, rows[1].Reason, "needs Chromium", "a skipped hook's reason is the hook's own words")
	assert.Equal(t, "disabled by configuration", rows[4].Reason)
	assert.Equal(t, 3, rows[3].Attempts)
	assert.Equal(t, int64(125000), rows[3].DurationMS)
	assert.Equal(t, workflows.PhaseRunning, rows[5].Phase)
	assert.Empty(t, rows[5].Status)

	assert.Equal(t, []string{"install chromium (or set CHROME_BINARY) to enable screenshot, pdf"}, hookHints(rows),
		"one hint for the browser hooks skipped without Chromium; a disabled hook needs none")
	assert.Nil(t, hookHints(rows[:1]))
}

func TestHookTable(t *testing.T) {
	rows := hookRows(sampleStatus())
	var out bytes.Buffer
	writeHookTable(&out, rows, hookHints(rows), 0)
	lines := strings.Split(strings.TrimRight(out.String(), "\n"), "\n")
	require.Len(t, lines, 1+7+1, out.String())
	assert.Regexp(t, `^  STEP  HOOK\s+STATUS\s+TRIES  TIME\s+OUTPUT / ERROR$`, lines[0])
	assert.Regexp(t, `^  2     headers\s+succeeded  1      0\.3s\s+HTTP 200$`, lines[1])
	assert.Regexp(t, `^  5     screenshot\s+skipped\s+1\s+0\.0s\s+screenshot needs Chromium: no Chromium found`, lines[2])
	assert.Regexp(t, `^  6     wget\s+failed\s+3\s+2m05s\s+wget exited 4: network failure\[31m red$`, lines[4],
		"errors are flattened to one line and a hook's escape sequences dropped")
	assert.Regexp(t, `^  9     index/on_Snapshot__95_index\s+running\s*$`, lines[6], "two hooks of one plugin are told apart by their stem")
	assert.Regexp(t, `^  9     index/on_Snapshot__96_index_extra\s+pending\s*$`, lines[7])
	assert.Equal(t, "  hint: install chromium (or set CHROME_BINARY) to enable screenshot, pdf", lines[8])
	// Columns line up.
	col := strings.Index(lines[0], "STATUS")
	for _, l := range lines[1:8] {
		assert.NotEqual(t, ' ', rune(l[col]), "status column starts at %d: %q", col, l)
		assert.Equal(t, ' ', rune(l[col-1]), l)
	}

	out.Reset()
	writeHookTable(&out, rows, nil, 40)
	for _, l := range strings.Split(strings.TrimRight(out.String(), "\n"), "\n") {
		assert.LessOrEqual(t, len([]rune(l)), 40, "lines are cut to the terminal width: %q", l)
	}
	assert.Contains(t, out.String(), "…")
}

// The error column starts with why the hook failed: the "hook KEY attempt
// N: " of the activity's failure message repeats the row's own columns.
func TestHookTableShowsWhyAHookFailed(t *testing.T) {
	const why = "wget: connection refused (exit 4 without ArchiveResult record)"
	st := workflows.Status{Hooks: []workflows.HookStatus{
		{Plugin: "wget", Hook: "on_Snapshot__60_wget.sh", Step: 6, Phase: workflows.PhaseDone, Result: &model.ArchiveResult{
			Status: model.StatusFailed, Attempts: 3, Error: "hook wget/on_Snapshot__60_wget.sh attempt 3: " + why}},
		{Plugin: "dom", Hook: "on_Snapshot__53_dom.sh", Step: 5, Phase: workflows.PhaseDone, Result: &model.ArchiveResult{
			Status: model.StatusFailed, Attempts: 1, Error: "hook dom/on_Snapshot__53_dom.sh: the segment's attempt ended while it ran"}},
		{Plugin: "pdf", Hook: "on_Snapshot__52_pdf.sh", Step: 5, Phase: workflows.PhaseDone, Result: &model.ArchiveResult{
			Status: model.StatusFailed, Attempts: 1, Error: "hook wget/on_Snapshot__60_wget.sh attempt 1: another hook's words stay whole"}},
	}}
	var out bytes.Buffer
	writeHookTable(&out, hookRows(st), nil, 0)
	lines := strings.Split(out.String(), "\n")
	require.GreaterOrEqual(t, len(lines), 4, out.String())
	assert.True(t, strings.HasSuffix(lines[1], "  "+why), "%q", lines[1])
	assert.True(t, strings.HasSuffix(lines[2], "  the segment's attempt ended while it ran"), "%q", lines[2])
	assert.True(t, strings.HasSuffix(lines[3], "  hook wget/on_Snapshot__60_wget.sh attempt 1: another hook's words stay whole"), "%q", lines[3])

	var js bytes.Buffer
	require.NoError(t, json.NewEncoder(&js).Encode(hookRows(st)))
	assert.Contains(t, js.String(), `"error":"hook wget/on_Snapshot__60_wget.sh attempt 3: `+why, "--json keeps the whole message")
}

// A hook waiting for a later retry says so, and when.
func TestHookTableShowsAWaitingHook(t *testing.T) {
	at := t0.Add(10 * time.Minute)
	st := workflows.Status{Hooks: []workflows.HookStatus{{Plugin: "wget", Hook: "on_Snapshot__60_wget.sh", Step: 6,
		Phase: workflows.PhaseWaiting, Result: &model.ArchiveResult{Status: model.StatusFailed, Attempts: 3, RetryAt: &at,
			Error: "exit 4 without ArchiveResult record"}}}}
	rows := hookRows(st)
	require.Len(t, rows, 1)
	assert.Equal(t, workflows.PhaseWaiting, rows[0].Phase)
	var out bytes.Buffer
	writeHookTable(&out, rows, nil, 0)
	assert.Contains(t, out.String(), "waiting (retry at "+at.Local().Format(time.DateTime)+")")
	assert.Contains(t, out.String(), "exit 4 without ArchiveResult record")
}

// A hook of an ended job without a result (the job was aborted or failed
// first) is not shown pending or running: it will not run.
func TestHookTableShowsHooksAnEndedJobDidNotRun(t *testing.T) {
	st := sampleStatus()
	st.State = model.StateAborted
	rows := hookRows(st)
	var out bytes.Buffer
	writeHookTable(&out, rows, nil, 0)
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	require.Len(t, lines, 8, out.String())
	for _, l := range lines[6:] {
		assert.Regexp(t, `index_?\w*\s+not run\s+no result: the job ended aborted before the hook finished$`, l)
	}
	assert.Regexp(t, `title\s+skipped`, lines[5], "a result is kept as it is")
	assert.Equal(t, phaseNotRun, rows[5].Phase)
	assert.Equal(t, phaseNotRun, rows[6].Phase)
}

func TestShortDurationAndText(t *testing.T) {
	assert.Equal(t, "0.0s", shortDuration(0))
	assert.Equal(t, "12.4s", shortDuration(12380*time.Millisecond))
	assert.Equal(t, "1m00s", shortDuration(time.Minute))
	assert.Equal(t, "a b c", oneLine("  a\n\tb\r\n c \x07"))
	assert.Equal(t, "abc", fitLine("abc", 3))
	assert.Equal(t, "ab…", fitLine("abcd", 3))
}

func TestStatusFromErrorReadsTheJobFromTheFailure(t *testing.T) {
	st := sampleStatus()
	st.State, st.Error = model.StateFailed, "hook wget failed"
	got, ok := statusFromError(temporal.NewApplicationError("job failed", "JobFailed", st))
	require.True(t, ok)
	assert.Equal(t, st.Error, got.Error)
	assert.Len(t, got.Hooks, len(st.Hooks))

	_, ok = statusFromError(temporal.NewApplicationError("no details", "X"))
	assert.False(t, ok)
	_, ok = statusFromError(os.ErrClosed)
	assert.False(t, ok)
}

func TestLiveFrame(t *testing.T) {
	rows := hookRows(sampleStatus())
	job := runningJob{ident: "abc", url: "https://example.com/", rows: rows,
		progress: progress{State: model.StateActive, Step: 9, HooksDone: 5, Hooks: 7, Bytes: 2048},
		since:    map[string]time.Duration{rows[5].key(): 1500 * time.Millisecond}}
	lines := liveFrame([]runningJob{job}, 0, 3200*time.Millisecond, 0)
	require.Len(t, lines, 1+5+1+1, strings.Join(lines, "\n"))
	assert.Equal(t, "⠋ abc  active · step 9/9 · hooks 5/7 · 2.0 KiB · 3.2s  https://example.com/", lines[0])
	assert.Regexp(t, `^    ✓ headers\s+succeeded\s+0\.3s  HTTP 200$`, lines[1])
	assert.Regexp(t, `^    ✗ wget\s+failed`, lines[4])
	assert.Regexp(t, `^    ▸ index/on_Snapshot__95_index\s+running\s+1\.5s$`, lines[6])
	assert.Equal(t, "    · 1 pending", lines[7])

	// Without rows (many jobs) a job is one line; the frame fits the screen.
	job.rows = nil
	assert.Len(t, liveFrame([]runningJob{job, job}, 1, 0, 0), 2)
	job.rows = rows
	capped := liveFrame([]runningJob{job, job}, 1, 0, 5)
	require.Len(t, capped, 5)
	assert.Equal(t, "  … 12 more lines (enlarge the terminal)", capped[4])
}

func TestScreenRedrawsInPlace(t *testing.T) {
	var out bytes.Buffer
	s := screen{w: &out}
	s.draw([]string{"one", "two that is long"}, 10)
	assert.Equal(t, "\r\x1b[Jone\ntwo that…\n", out.String(), "lines are cut below the width, so none wraps")
	out.Reset()
	s.draw([]string{"three"}, 10)
	assert.Equal(t, "\x1b[2A\r\x1b[Jthree\n", out.String(), "cursor up over the last frame, erase, draw")
	out.Reset()
	s.clear()
	assert.Equal(t, "\x1b[1A\r\x1b[J", out.String())
	out.Reset()
	s.clear()
	assert.Empty(t, out.String(), "nothing on screen, nothing to clear")
}

func TestFindHookLogs(t *testing.T) {
	snap := t.TempDir()
	write := func(rel, content string, age time.Duration) {
		p := filepath.Join(snap, rel)
		require.NoError(t, os.MkdirAll(filepath.Dir(p), 0o755))
		require.NoError(t, os.WriteFile(p, []byte(content), 0o644))
		at := time.Now().Add(-age)
		require.NoError(t, os.Chtimes(p, at, at))
	}
	a1, a2 := strings.Repeat("a", 32), strings.Repeat("b", 32)
	write("wget/on_Snapshot__60_wget.bg."+a2+".stdout.log", "second out\n", time.Minute)
	write("wget/on_Snapshot__60_wget.bg."+a2+".stderr.log", "second err\n", time.Minute)
	write("wget/on_Snapshot__60_wget.bg."+a1+".stdout.log", "first out\n", time.Hour)
	write("wget/on_Snapshot__60_wget.bg."+a1+".stderr.log", "first err\n", time.Hour)
	write("wget/on_Snapshot__60_wget.bg."+a1+".pid", "123", time.Hour)
	write("wget/index.html", "output, not a log", time.Hour)
	write("title/on_Snapshot__53_title."+a1+".stdout.log", "title out\n", time.Hour)

	for _, name := range []string{"wget", "on_Snapshot__60_wget.bg.sh", "on_Snapshot__60_wget.bg"} {
		files, err := findHookLogs(snap, name)
		require.NoError(t, err, name)
		var got []string
		for _, f := range files {
			got = append(got, f.AttemptID[:1]+" "+f.Stream)
		}
		assert.Equal(t, []string{"a stdout", "a stderr", "b stdout", "b stderr"}, got, "%s: attempts oldest first, stdout first", name)
	}
	files, err := findHookLogs(snap, "title")
	require.NoError(t, err)
	require.Len(t, files, 1)
	assert.Equal(t, "on_Snapshot__53_title", files[0].Hook)
	files, err = findHookLogs(snap, "nope")
	require.NoError(t, err)
	assert.Empty(t, files)
	_, err = findHookLogs(filepath.Join(snap, "missing"), "wget")
	assert.ErrorIs(t, err, os.ErrNotExist)
}

// Without a terminal a job gets a line when it is in another step than in
// its last line, at most one every plainEvery, and none before discovery.
func TestPlainProgressLines(t *testing.T) {
	srv := testredis.Start(t)
	cfg := config.Default()
	store, err := rkeys.NewStore(srv.Client(), backend.StoreOptions(&cfg), zap.NewNop())
	require.NoError(t, err)
	ctx := context.Background()
	id, url, err := ident.FromURL("https://example.com/plain")
	require.NoError(t, err)
	require.NoError(t, store.CreateJob(ctx, rkeys.Job{Ident: id, URL: url, FetchDepth: "shallow", StartedBy: "t", StartedIn: "cli",
		Settings: model.Settings{Concurrency: 1}, WorkflowID: id, RunID: "r", TaskQueue: "q"}))

	var out bytes.Buffer
	a := newApp(strings.NewReader(""), &out, &out)
	p := a.newReporter(&invocation{}, &backend.Backend{Store: store}, []submitted{{Ident: id, URL: url}})
	require.IsType(t, &plainReporter{}, p, "a buffer is not a terminal")
	step := func(n int, at time.Duration) {
		require.NoError(t, store.SetStep(ctx, id, n))
		p.progress(ctx, at)
	}
	p.progress(ctx, 0) // not discovered yet: nothing to say
	require.NoError(t, store.SetHooksTotal(ctx, id, 11))
	step(2, 500*time.Millisecond)
	step(5, time.Second)   // too soon after the last line
	step(5, 3*time.Second) // another step than in the last line
	step(6, 4*time.Second) // too soon again
	step(6, 5500*time.Millisecond)
	step(6, 8*time.Second) // the same step: nothing new
	assert.Equal(t, id+"  pending  step 2/9  hooks 0/11  0 B  500ms\n"+
		id+"  pending  step 5/9  hooks 0/11  0 B  3s\n"+
		id+"  pending  step 6/9  hooks 0/11  0 B  5.5s\n", out.String())
}

// A crawl's lines are its pages, not a step: nothing before its first
// page, then a line when other pages are done, at most one every
// plainCrawlEvery.
func TestPlainProgressLinesOfACrawl(t *testing.T) {
	srv := testredis.Start(t)
	cfg := config.Default()
	store, err := rkeys.NewStore(srv.Client(), backend.StoreOptions(&cfg), zap.NewNop())
	require.NoError(t, err)
	ctx := context.Background()
	id, url, err := ident.FromURL("https://example.com/crawl")
	require.NoError(t, err)
	require.NoError(t, store.CreateJob(ctx, rkeys.Job{Ident: id, URL: url, FetchDepth: model.FetchInf, StartedBy: "t", StartedIn: "cli",
		Settings: model.Settings{Concurrency: 1}, WorkflowID: id, RunID: "r", TaskQueue: "q"}))
	fr, err := frontier.New(srv.Client(), store.Keys(), frontier.Options{})
	require.NoError(t, err)

	var out bytes.Buffer
	a := newApp(strings.NewReader(""), &out, &out)
	p := a.newReporter(&invocation{}, &backend.Backend{Store: store, Redis: srv.Client()}, []submitted{{Ident: id, URL: url}})
	p.progress(ctx, 0) // no frontier yet: nothing to say
	_, err = fr.SeedList(ctx, id, "test", []string{url, url + "/a", url + "/b"}, frontier.Config{MaxDepth: -1, MaxAttempts: 1})
	require.NoError(t, err)
	claimed, _, err := fr.Claim(ctx, id, 3, "t", 0)
	require.NoError(t, err)
	require.Len(t, claimed, 3)
	done := func(i int, at time.Duration) {
		if i >= 0 {
			_, err := fr.Complete(ctx, id, claimed[i].ID, claimed[i].Attempts, frontier.Outcome{Status: frontier.StatusSucceeded})
			require.NoError(t, err)
		}
		p.progress(ctx, at)
	}
	done(-1, time.Second)
	done(0, 5*time.Second)   // too soon after the last line
	done(-1, 11*time.Second) // other pages done than in the last line
	done(1, 12*time.Second)  // too soon again
	done(-1, 25*time.Second)
	done(-1, 40*time.Second) // the same pages done: nothing new
	assert.Equal(t, id+"  pending  crawl  pages 0/3 done  0 items  0 B  1s\n"+
		id+"  pending  crawl  pages 1/3 done  0 items  0 B  11s\n"+
		id+"  pending  crawl  pages 2/3 done  0 items  0 B  25s\n", out.String())

	lines := liveFrame([]runningJob{{ident: id, url: url, progress: progress{State: model.StateActive, Crawl: true, PagesDone: 2, Pages: 3, Items: 7, Bytes: 2048}}},
		0, 3*time.Second, 10)
	assert.Equal(t, []string{"⠋ " + id + "  active · crawl · pages 2/3 done · 7 items · 2.0 KiB · 3s  " + url}, lines)
}

// TestCrawlStatusSaysItsDepthLimit: `status` of a `--depth 1` crawl names
// its limit; a `--depth inf` crawl says it has none.
func TestCrawlStatusSaysItsDepthLimit(t *testing.T) {
	var b strings.Builder
	printCrawl(&b, &crawlJSON{MaxDepth: 1})
	assert.Contains(t, b.String(), "  depth:    at most 1 link(s) from the start page (--depth 1)\n")
	b.Reset()
	printCrawl(&b, &crawlJSON{MaxDepth: -1})
	assert.Contains(t, b.String(), "  depth:    no depth limit (--depth inf)\n")
}

// TestCrawlShowsPagesWaitingForALaterRetry: `status` says how many pages
// wait for a later retry and when the first is due; `pages` shows such a
// page as waiting (retry at …), as a hook's row does.
func TestCrawlShowsPagesWaitingForALaterRetry(t *testing.T) {
	at := time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)
	var b strings.Builder
	printCrawl(&b, &crawlJSON{MaxDepth: 1, Waiting: 2, RetryAt: &at})
	assert.Contains(t, b.String(), "  waiting:  2 ready page(s) waiting (retry at "+at.Local().Format(time.DateTime)+")")
	b.Reset()
	printCrawl(&b, &crawlJSON{MaxDepth: 1})
	assert.NotContains(t, b.String(), "waiting")

	p := newPageJSON(frontier.Page{ID: 3, State: frontier.StateReady, Status: frontier.StatusWaiting, LaterRetries: 1, RetryAt: at})
	assert.Equal(t, "waiting (retry at "+at.Local().Format(time.DateTime)+")", p.statusWords())
	assert.Equal(t, 1, p.LaterRetries)
	assert.Equal(t, "succeeded", newPageJSON(frontier.Page{Status: frontier.StatusSucceeded}).statusWords())
}

// TestAJobThatOnlyWaitsShowsAsWaiting: a running job whose hash has
// retry_at (a snapshot whose hooks, or a crawl whose only remaining pages,
// wait for a later retry) shows as waiting (retry at …) in status and
// waiting in list; a final job, or one without retry_at, shows its state.
func TestAJobThatOnlyWaitsShowsAsWaiting(t *testing.T) {
	at := time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)
	assert.Equal(t, waitingWords(at), jobState(model.StateActive, &at, true))
	assert.Equal(t, "waiting", jobState(model.StateActive, &at, false))
	assert.Equal(t, "finished", jobState(model.StateFinished, &at, true))
	assert.Equal(t, "active", jobState(model.StateActive, nil, true))

	j := toJSON(rkeys.JobView{Ident: "j", State: model.StateActive, RetryAt: at}, "")
	require.NotNil(t, j.RetryAt)
	assert.Equal(t, at, *j.RetryAt)
	assert.Nil(t, toJSON(rkeys.JobView{Ident: "j", State: model.StateFinished, RetryAt: at}, "").RetryAt, "a final job waits for nothing")
}

// TestCrawlStatusSaysHowManyClaimedPagesRun: status splits a crawl's
// claimed pages into those running (the start page while its seed
// snapshot runs, one per RunPage activity, and what each RunPageBatch's
// heartbeat says) and those waiting their turn in a batch; without an answer from Temporal it says nothing of the split.
func TestCrawlStatusSaysHowManyClaimedPagesRun(t *testing.T) {
	beat, err := converter.GetDefaultDataConverter().ToPayloads(activities.BatchProgress{Attempt: 1, PagesRunning: 2, PagesWaiting: 70})
	require.NoError(t, err)
	pending := func(name string, details *commonpb.Payloads) *workflowpb.PendingActivityInfo {
		return &workflowpb.PendingActivityInfo{ActivityType: &commonpb.ActivityType{Name: name}, HeartbeatDetails: details}
	}
	c := &mocks.Client{}
	c.On("DescribeWorkflowExecution", mock.Anything, "crawl1", "").Return(&workflowservice.DescribeWorkflowExecutionResponse{
		PendingActivities: []*workflowpb.PendingActivityInfo{
			pending("RunPageBatch", beat), pending("RunPageBatch", nil), pending("RunPage", nil), pending("SetJobState", nil),
		},
		PendingChildren: []*workflowpb.PendingChildExecutionInfo{{WorkflowId: "crawl1/seed", WorkflowTypeName: "SnapshotWorkflow"}},
	}, nil)
	c.On("DescribeWorkflowExecution", mock.Anything, "gone", "").Return(nil, errors.New("not found"))

	running := pagesRunning(context.Background(), c, "crawl1")
	require.NotNil(t, running)
	assert.Equal(t, int64(4), *running, "the start page, two in a batch that beat, one page of its own; a batch yet to beat counts none")
	assert.Nil(t, pagesRunning(context.Background(), c, "gone"))

	var b strings.Builder
	printCrawl(&b, &crawlJSON{MaxDepth: 1, Pages: frontier.StateCounts{Claimed: 74}, Running: running})
	assert.Contains(t, b.String(), "  claimed:  4 running, 70 waiting their turn in a page batch or being recorded\n")
	b.Reset()
	printCrawl(&b, &crawlJSON{MaxDepth: 1, Pages: frontier.StateCounts{Claimed: 74}})
	assert.NotContains(t, b.String(), "claimed: ")
}
