//go:build dev || cluster

package cluster

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/archiveflow/archiveflow/config"
	"github.com/archiveflow/archiveflow/internal/testredis"
)

// Env is one test's archiveflow on the shared cluster: its own redis-server,
// pool and task queue, and the ARCHIVEFLOW_* settings its worker processes
// and the starter share (as docker-compose's deploy/archiveflow.env does).
type Env struct {
	Bins     Binaries
	Temporal *Temporal
	// Redis is a client of the test's Redis; RedisURL reaches it.
	Redis    *redis.Client
	RedisURL string
	// Pool is the test's pool: its own name and task queue.
	Pool config.Pool
	// Vars are the settings, ARCHIVEFLOW_KEY=value.
	Vars []string
	dir  string
}

var envSeq atomic.Int64

// EnvOptions adjusts an Env.
type EnvOptions struct {
	// Plugins is the plugin root the workers run hooks from.
	Plugins string
	// Vars are more ARCHIVEFLOW_* settings; they come last and win.
	Vars []string
}

// NewEnv starts a redis-server for tb (a real one: the suite's counters
// must come from the server archiveflow runs against) and returns the
// settings of a pool unique to tb. Timings are short so that lost hosts
// are noticed in seconds: heartbeat timeout 3 s, host timeout 5 s,
// pipeline TTL 6 s.
func NewEnv(tb testing.TB, bins Binaries, tmp *Temporal, namespace string, o EnvOptions) *Env {
	tb.Helper()
	rs := testredis.Start(tb)
	if !rs.Real() {
		tb.Fatalf("the cluster suite needs a real redis-server (apt-get install redis-server)")
	}
	n := envSeq.Add(1)
	pool := config.Default().Pools[0] // the default slots
	pool.Name, pool.TaskQueue = fmt.Sprintf("cluster%d", n), fmt.Sprintf("cluster-%d-%d", os.Getpid(), n)
	pools, err := json.Marshal([]config.Pool{pool})
	if err != nil {
		tb.Fatalf("encode pools: %v", err)
	}
	e := &Env{Bins: bins, Temporal: tmp, Redis: rs.Client(), RedisURL: rs.URL, Pool: pool, dir: tb.TempDir()}
	e.Vars = append([]string{
		"ARCHIVEFLOW_TEMPORAL_HOST_PORT=" + tmp.HostPort(),
		"ARCHIVEFLOW_TEMPORAL_NAMESPACE=" + namespace,
		"ARCHIVEFLOW_REDIS_URL=" + rs.URL,
		"ARCHIVEFLOW_POOLS=" + string(pools),
		"ARCHIVEFLOW_JOB_TASK_QUEUE=" + pool.TaskQueue,
		"ARCHIVEFLOW_PLUGINS_BUILTIN=false", // the test's fixture hooks only
		"ARCHIVEFLOW_PLUGINS_DIRS=" + o.Plugins,
		"ARCHIVEFLOW_HOOKS_PASS_ENV=CLUSTER_*", // the drills' hooks read CLUSTER_EVENTS
		"ARCHIVEFLOW_LOG_FORMAT=json",
		"ARCHIVEFLOW_HOOKS_HEARTBEAT_INTERVAL=500ms",
		"ARCHIVEFLOW_HOOKS_HEARTBEAT_TIMEOUT=3s",
		"ARCHIVEFLOW_HOOKS_GRACE=2s",
		"ARCHIVEFLOW_JOB_HOST_TIMEOUT=5s",
		"ARCHIVEFLOW_RETRY_INITIAL_INTERVAL=100ms",
		"ARCHIVEFLOW_RETRY_MAXIMUM_INTERVAL=500ms",
		"ARCHIVEFLOW_WORKER_DRAIN_TIMEOUT=2s",
		"ARCHIVEFLOW_WORKER_STATS_INTERVAL=1s",
		"ARCHIVEFLOW_WORKER_PIPELINE_TTL=6s",
	}, o.Vars...)
	return e
}

// Worker is one `workers` process.
type Worker struct {
	*Proc
	// ArchiveDir is its archive: archives are per host.
	ArchiveDir string
}

// StartWorker starts a `workers` process for the env's pool, named name
// (its nickname, archive dir and log), with extra settings last. It is
// stopped (SIGTERM) when tb ends, and its log printed if tb failed.
func (e *Env) StartWorker(tb testing.TB, name string, extra ...string) *Worker {
	tb.Helper()
	archive := filepath.Join(e.dir, name, "archive")
	if err := os.MkdirAll(archive, 0o755); err != nil {
		tb.Fatalf("worker %s: %v", name, err)
	}
	vars := append(append([]string{}, e.Vars...),
		"ARCHIVEFLOW_ARCHIVE_DIR="+archive, "ARCHIVEFLOW_WORKER_NICKNAME="+name)
	p, err := start(procSpec{name: name, bin: e.Bins.Workers, args: []string{"--pool", e.Pool.Name},
		env: cleanEnv(append(vars, extra...)...), dir: filepath.Join(e.dir, name), log: logPath(e.dir, name)})
	if err != nil {
		tb.Fatalf("%v", err)
	}
	tb.Cleanup(func() {
		if err := p.Stop(30 * time.Second); err != nil {
			tb.Errorf("worker %s: %v", name, err)
		}
		if tb.Failed() {
			tb.Logf("%s log (last lines):\n%s", name, p.Tail(40))
		}
	})
	return &Worker{Proc: p, ArchiveDir: archive}
}

// Result is one starter run.
type Result struct {
	Code           int
	Stdout, Stderr string
}

// Starter runs the starter binary with args and the env's settings, as a
// user would in a shell, and returns its exit code and output.
func (e *Env) Starter(tb testing.TB, args ...string) Result {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, e.Bins.Starter, args...)
	cmd.Env = cleanEnv(e.Vars...)
	cmd.Dir = e.dir
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	err := cmd.Run()
	res := Result{Stdout: out.String(), Stderr: errOut.String()}
	var exit *exec.ExitError
	switch {
	case err == nil:
	case errors.As(err, &exit):
		res.Code = exit.ExitCode()
	default:
		tb.Fatalf("starter %s: %v", strings.Join(args, " "), err)
	}
	return res
}

// StarterJSON runs the starter with --json, requires exit 0 and decodes
// its output into v.
func (e *Env) StarterJSON(tb testing.TB, v any, args ...string) {
	tb.Helper()
	res := e.Starter(tb, append(args, "--json")...)
	if res.Code != 0 {
		tb.Fatalf("starter %s: exit %d: %s", strings.Join(args, " "), res.Code, res.Stderr)
	}
	if err := json.Unmarshal([]byte(res.Stdout), v); err != nil {
		tb.Fatalf("starter %s --json: %v: %s", strings.Join(args, " "), err, res.Stdout)
	}
}

// Job is a job as `starter status/list --json` shows it.
type Job struct {
	Ident          string `json:"ident"`
	URL            string `json:"url"`
	State          string `json:"state"`
	CurrentStep    int    `json:"current_step"`
	HooksTotal     int64  `json:"hooks_total"`
	HooksSucceeded int64  `json:"hooks_succeeded"`
	HooksFailed    int64  `json:"hooks_failed"`
	HooksSkipped   int64  `json:"hooks_skipped"`
	HooksNoResults int64  `json:"hooks_noresults"`
	Bytes          int64  `json:"bytes_downloaded"`
	TaskQueue      string `json:"task_queue"`
	PipelineID     string `json:"pipeline_id"`
	UI             string `json:"ui"`
}

// Submit submits urls with `starter submit URL... --json` plus flags and
// returns the jobs it printed.
func (e *Env) Submit(tb testing.TB, urls []string, flags ...string) []Job {
	tb.Helper()
	var out struct {
		Jobs []Job `json:"jobs"`
	}
	e.StarterJSON(tb, &out, append(append([]string{"submit"}, urls...), flags...)...)
	if len(out.Jobs) != len(urls) {
		tb.Fatalf("starter submit printed %d jobs for %d URLs", len(out.Jobs), len(urls))
	}
	return out.Jobs
}

// List is `starter list [--state S] --json`.
func (e *Env) List(tb testing.TB, state string) []Job {
	tb.Helper()
	args := []string{"list"}
	if state != "" {
		args = append(args, "--state", state)
	}
	var out struct {
		Jobs []Job `json:"jobs"`
	}
	e.StarterJSON(tb, &out, args...)
	return out.Jobs
}

// Status is `starter status IDENT --json`.
func (e *Env) Status(tb testing.TB, ident string) Job {
	tb.Helper()
	var j Job
	e.StarterJSON(tb, &j, "status", ident)
	return j
}

// WaitFinal polls `starter list --json` until n jobs are in a final state
// (finished, aborted, failed) and returns them, failing tb after timeout.
//
// A job is counted once by its ident: `starter list` reads the state
// indexes one after another, so a job that moves from state:active to
// state:finished between two reads is listed twice.
func (e *Env) WaitFinal(tb testing.TB, n int, timeout time.Duration) []Job {
	tb.Helper()
	deadline := time.Now().Add(timeout)
	for {
		var final []Job
		states := map[string]int{}
		seen := map[string]bool{}
		for _, j := range e.List(tb, "") {
			if seen[j.Ident] {
				continue
			}
			seen[j.Ident] = true
			states[j.State]++
			switch j.State {
			case "finished", "aborted", "failed":
				final = append(final, j)
			}
		}
		if len(final) >= n {
			return final
		}
		if time.Now().After(deadline) {
			tb.Fatalf("%d of %d jobs final after %s; states: %v", len(final), n, timeout, states)
		}
		time.Sleep(500 * time.Millisecond)
	}
}
