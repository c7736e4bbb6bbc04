package engine

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/archiveflow/archiveflow/activities"
	"github.com/archiveflow/archiveflow/internal/model"
)

// fixedSettings is a SettingsReader that always reads the same settings.
type fixedSettings model.Settings

func (s fixedSettings) Settings(context.Context) (model.Settings, error) {
	return model.Settings(s), nil
}

// stepsFixture is a fixture whose RunSteps reads settings of concurrency.
func stepsFixture(t *testing.T, concurrency int) *fixture {
	f := newFixture(t)
	opts := testOptions()
	opts.Settings = fixedSettings{Concurrency: concurrency, UserAgent: "archiveflow-test/1"}
	f.withOptions(opts)
	return f
}

// traceHook is a hook that appends "start NAME" and "end NAME" to trace
// around a short run, so the order and overlap of hooks can be read back.
func (f *fixture) traceHook(trace, plugin, name string) activities.HookSpec {
	return f.hook(plugin, name, `echo "start `+name+`" >> `+trace+`
sleep 0.2
echo "end `+name+`" >> `+trace+`
echo '{"type":"ArchiveResult","status":"succeeded","output_str":"ok"}'`)
}

func stepsInput(concurrency int, hooks ...activities.HookSpec) activities.StepsInput {
	in := activities.StepsInput{
		Job:             activities.Job{Ident: "abc123", URL: "https://example.com/", SnapshotID: "abc123"},
		Settings:        model.Settings{Concurrency: concurrency, UserAgent: "archiveflow-test/1"},
		SequentialSteps: []int{5},
		HooksTotal:      len(hooks),
	}
	for _, h := range hooks {
		if !slices.Contains(in.Steps, h.Step) {
			in.Steps = append(in.Steps, h.Step)
		}
		in.Hooks = append(in.Hooks, activities.StepHook{Hook: h, Key: "run-1/" + h.Key(), Limit: h.Timeout + h.Grace + time.Second})
	}
	return in
}

func readTrace(t *testing.T, trace string) []string {
	t.Helper()
	b, err := os.ReadFile(trace)
	if os.IsNotExist(err) {
		return nil
	}
	require.NoError(t, err)
	return strings.Fields(strings.ReplaceAll(string(b), "\n", " "))
}

// maxOverlap reads a trace of "start X"/"end X" pairs: the most hooks
// running at once.
func maxOverlap(trace []string) int {
	running, peak := 0, 0
	for i := 0; i+1 < len(trace); i += 2 {
		if trace[i] == "start" {
			running++
		} else {
			running--
		}
		peak = max(peak, running)
	}
	return peak
}

func position(trace []string, kind, name string) int {
	for i := 0; i+1 < len(trace); i += 2 {
		if trace[i] == kind && trace[i+1] == name {
			return i
		}
	}
	return -1
}

func runSteps(t *testing.T, f *fixture, in activities.StepsInput, details ...any) (activities.StepsResult, error) {
	t.Helper()
	env := f.env()
	if len(details) > 0 {
		env.SetHeartbeatDetails(details[0])
	}
	v, err := env.ExecuteActivity(f.acts.RunSteps, in)
	if err != nil {
		return activities.StepsResult{}, err
	}
	var res activities.StepsResult
	require.NoError(t, v.Get(&res))
	return res, nil
}

// The hooks of a step run in parallel up to the job's concurrency, in plan
// order; the next step starts once every hook of the step ended; every
// result is written to Redis by the host.
func TestRunStepsBoundsParallelismAndKeepsTheBarrier(t *testing.T) {
	f := stepsFixture(t, 2)
	trace := filepath.Join(f.root, "trace")
	a := f.traceHook(trace, "p", "on_Snapshot__10_a.sh")
	b := f.traceHook(trace, "p", "on_Snapshot__11_b.sh")
	c := f.traceHook(trace, "p", "on_Snapshot__12_c.sh")
	d := f.traceHook(trace, "p", "on_Snapshot__20_d.sh")

	res, err := runSteps(t, f, stepsInput(2, a, b, c, d))
	require.NoError(t, err)

	require.Len(t, res.Outcomes, 4)
	for _, o := range res.Outcomes {
		assert.Nil(t, o.Failure, o.Hook)
		assert.Equal(t, model.StatusSucceeded, o.Result.Status, o.Hook)
		assert.True(t, o.Result.Recorded, "%s recorded by the host", o.Hook)
	}
	tr := readTrace(t, trace)
	assert.Equal(t, 2, maxOverlap(tr), "concurrency 2 bounds the step: %v", tr)
	assert.Less(t, position(tr, "start", a.Name), position(tr, "start", c.Name), "plan order")
	for _, n := range []string{a.Name, b.Name, c.Name} {
		assert.Less(t, position(tr, "end", n), position(tr, "start", d.Name), "step 2 waits for %s", n)
	}
	assert.Len(t, f.store.results, 4)
}

// A hook that runs past its limit is a failed first attempt: its step is
// the segment's last, and the workflow retries it.
func TestRunStepsBoundsEachHookByItsLimit(t *testing.T) {
	f := stepsFixture(t, 2)
	trace := filepath.Join(f.root, "trace")
	slow := f.hook("p", "on_Snapshot__10_slow.sh", "sleep 30")
	next := f.traceHook(trace, "p", "on_Snapshot__20_next.sh")
	in := stepsInput(2, slow, next)
	in.Hooks[0].Limit = 300 * time.Millisecond

	start := time.Now()
	res, err := runSteps(t, f, in)
	require.NoError(t, err)

	assert.Less(t, time.Since(start), 20*time.Second, "the hook was stopped at its limit, not its timeout")
	require.Len(t, res.Outcomes, 1)
	fail := res.Outcomes[0].Failure
	require.NotNil(t, fail)
	assert.True(t, fail.Retryable)
	assert.Contains(t, fail.Message, "ran past its limit")
	assert.Empty(t, readTrace(t, trace), "no later step starts after a failed hook")
}

// A retried attempt of a segment resumes from its heartbeat: a hook that
// ended is not run again, one that was running is reported interrupted.
func TestRunStepsResumesFromItsHeartbeat(t *testing.T) {
	f := stepsFixture(t, 2)
	trace := filepath.Join(f.root, "trace")
	a := f.traceHook(trace, "p", "on_Snapshot__10_a.sh")
	b := f.traceHook(trace, "p", "on_Snapshot__11_b.sh")
	c := f.traceHook(trace, "p", "on_Snapshot__20_c.sh")
	doneA := activities.StepOutcome{Hook: a.Key(), Result: activities.RunHookResult{Recorded: true,
		ArchiveResult: model.ArchiveResult{Plugin: "p", Hook: a.Name, Step: 1, Status: model.StatusSucceeded, Attempts: 1}}}

	res, err := runSteps(t, f, stepsInput(2, a, b, c), activities.StepsProgress{Done: []activities.StepOutcome{doneA}})
	require.NoError(t, err)
	require.Len(t, res.Outcomes, 3)
	tr := readTrace(t, trace)
	assert.Equal(t, -1, position(tr, "start", a.Name), "a ended in the attempt before")
	assert.NotEqual(t, -1, position(tr, "start", b.Name))
	assert.NotEqual(t, -1, position(tr, "start", c.Name))

	f2 := stepsFixture(t, 2)
	trace2 := filepath.Join(f2.root, "trace")
	a2 := f2.traceHook(trace2, "p", a.Name)
	b2 := f2.traceHook(trace2, "p", b.Name)
	c2 := f2.traceHook(trace2, "p", c.Name)
	res, err = runSteps(t, f2, stepsInput(2, a2, b2, c2), activities.StepsProgress{Done: []activities.StepOutcome{doneA}, Running: []string{b2.Key()}})
	require.NoError(t, err)
	require.Len(t, res.Outcomes, 2)
	assert.True(t, res.Outcomes[1].Failure.Interrupted, "b was running when the attempt before ended")
	assert.Empty(t, readTrace(t, trace2), "nothing runs again; the workflow retries b before step 2")
}
