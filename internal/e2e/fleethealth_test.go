//go:build dev

package e2e

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/archiveflow/archiveflow/config"
	"github.com/archiveflow/archiveflow/internal/fleethealth"
)

// TestFleetHealthAcrossThreeHosts: three worker processes under different
// host names (w1, w2, w3) take the jobs; a plugin failing on w1 only goes
// critical there (and only there) at the outcome that reaches
// flapjack.critical_after, is in failed_checks and first in starter health,
// with exactly one problem notification in the queue and at a loopback
// webhook; an unscheduled maintenance of the plugin on w1 acknowledges it
// (one acknowledgement notification) and skips the plugin there, naming the
// maintenance, with no problem notification; fixed and out of maintenance,
// it recovers with exactly one recovery notification. A host-wide
// maintenance drains w2 (its pipeline record says why) and it resumes by
// itself when the maintenance ends.
func TestFleetHealthAcrossThreeHosts(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the workers and starter binaries")
	}
	workersBin, starterBin := BuildWorkers(t), BuildCommand(t, "github.com/archiveflow/archiveflow/starter")
	root := t.TempDir()
	fixed := filepath.Join(t.TempDir(), "fixed")
	writeHook(t, root, "probe", "on_Snapshot__10_probe.sh", `if [ "$E2E_PROBE_FAIL" = 1 ] && [ ! -e "$E2E_FIXED" ]; then echo "probe: tool missing" >&2; exit 1; fi
echo '{"type":"ArchiveResult","status":"succeeded","output_str":"probed"}'
`)
	var mu sync.Mutex
	var hooked []string
	webhook := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		var n struct {
			EventID string `json:"event_id"`
			Type    string `json:"type"`
		}
		assert.NoError(t, json.Unmarshal(b, &n))
		mu.Lock()
		hooked = append(hooked, n.Type+" "+n.EventID)
		mu.Unlock()
	}))
	defer webhook.Close()
	s := NewStack(t, server, root, func(c *config.Config) {
		c.Retry.MaximumAttempts = 1 // one outcome per job
	})
	ctx := context.Background()
	env := []string{"E2E_FIXED=" + fixed, "ARCHIVEFLOW_FLAPJACK_CRITICAL_AFTER=2", "ARCHIVEFLOW_FLAPJACK_MAINTENANCE_POLL=200ms",
		"ARCHIVEFLOW_FLAPJACK_WEBHOOK=" + webhook.URL}
	StartWorker(t, workersBin, s.Config, "w1", append(env, "E2E_PROBE_FAIL=1")...)
	StartWorker(t, workersBin, s.Config, "w2", env...)
	StartWorker(t, workersBin, s.Config, "w3", env...)

	notClaiming := func() map[string]string {
		views, err := s.Store.ListPipelines(ctx)
		require.NoError(t, err)
		out := map[string]string{}
		for _, v := range views {
			out[v.Fields["nickname"]] = v.Fields["not_claiming"]
		}
		return out
	}
	require.Eventually(t, func() bool { return len(notClaiming()) == 3 }, 60*time.Second, 100*time.Millisecond, "three workers registered")
	starter := func(args ...string) starterResult {
		t.Helper()
		// The starter reads the workers' configuration (its webhook).
		cmd := starterCommand(t, starterBin, s, args...)
		cmd.Env = append(cmd.Env, "ARCHIVEFLOW_FLAPJACK_WEBHOOK="+webhook.URL)
		var stdout, stderr strings.Builder
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		return starterExit(t, cmd, cmd.Run(), &stdout, &stderr)
	}
	queue := func() []string {
		raw, err := s.Redis.LRange(ctx, s.Config.Flapjack.Notifications, 0, -1).Result()
		require.NoError(t, err)
		var out []string
		for _, r := range raw {
			var n struct {
				EventID string `json:"event_id"`
				Type    string `json:"type"`
			}
			require.NoError(t, json.Unmarshal([]byte(r), &n))
			out = append(out, n.Type+" "+n.EventID)
		}
		return out
	}
	webhookGot := func(want ...string) {
		t.Helper()
		require.Eventually(t, func() bool {
			mu.Lock()
			defer mu.Unlock()
			return len(hooked) >= len(want)
		}, 30*time.Second, 50*time.Millisecond, "webhook notifications")
		mu.Lock()
		defer mu.Unlock()
		assert.Equal(t, want, hooked)
	}
	n := 0
	var lastJob Job
	runJob := func() Job {
		t.Helper()
		n++
		j := s.Submit(t, "http://127.0.0.1:1/fleet-"+string(rune('a'+n)), nil)
		lastJob = j
		_ = s.Wait(t, j, 2*time.Minute)
		return j
	}
	state := func(host string) string { return s.Redis.HGet(ctx, "check:"+host+":probe", "state").Val() }

	// Jobs go to whichever worker claims them; run them until w1 has the
	// threshold's outcomes.
	count := func(host string) int {
		n, _ := strconv.Atoi(s.Redis.HGet(ctx, "check:"+host+":probe", "count").Val())
		return n
	}
	runUntil := func(what string, done func() bool) {
		t.Helper()
		for i := 0; i < 40 && !done(); i++ {
			runJob()
		}
		require.True(t, done(), what)
	}
	runUntil("w1 ran the plugin once", func() bool { return count("w1") >= 1 })
	assert.Equal(t, "warning", state("w1"), "one hard failure: under the threshold")
	runUntil("w1 ran the plugin twice", func() bool { return count("w1") >= 2 })
	assert.Equal(t, "critical", state("w1"), "critical at the threshold's outcome (flapjack.critical_after 2)")
	for _, h := range []string{"w2", "w3"} {
		assert.NotEqual(t, "critical", state(h), "only on w1")
		assert.NotContains(t, s.Redis.ZRange(ctx, "failed_checks", 0, -1).Val(), h+":probe")
	}
	_, err := s.Redis.ZScore(ctx, "failed_checks", "w1:probe").Result()
	require.NoError(t, err, "w1:probe in failed_checks")
	res := starter("health")
	require.Equal(t, 0, res.code, res.stderr)
	assert.Regexp(t, `\A[^\n]*\nw1\s+probe\s+critical\s`, res.stdout, "failing first in starter health")
	assert.Equal(t, []string{"problem w1:probe"}, queue())
	webhookGot("problem w1:probe")

	// Acknowledge: a maintenance of the plugin on w1.
	res = starter("maintenance", "w1", "probe", "--for", "8s", "--summary", "reinstalling the tool")
	require.Equal(t, 0, res.code, res.stderr)
	assert.Contains(t, res.stdout, "(1 failing check(s) acknowledged)")
	before := count("w1")
	runUntil("w1 ran the plugin during its maintenance", func() bool { return count("w1") > before })
	skipped := lastJob
	assert.Equal(t, []string{"problem w1:probe", "acknowledgement w1:probe"}, queue(), "no problem notification during it")
	assert.Equal(t, "critical", state("w1"), "a skipped outcome says nothing about the plugin")
	health, err := fleethealth.FromConfig(s.Store, s.Config)
	require.NoError(t, err)
	_, changes, err := health.History(ctx, skipped.Ident, "on_Snapshot__10_probe.sh", 1)
	require.NoError(t, err)
	require.Len(t, changes, 1)
	assert.Contains(t, changes[0].Summary, "skipped: in maintenance: unscheduled maintenance of w1:probe until ")
	assert.Contains(t, changes[0].Summary, ": reinstalling the tool")

	// Fixed, and the maintenance over: it recovers.
	require.NoError(t, os.WriteFile(fixed, nil, 0o644))
	require.Eventually(t, func() bool {
		_, on, err := health.Active(ctx, "w1", "probe")
		return err == nil && !on
	}, 30*time.Second, 100*time.Millisecond)
	before = count("w1")
	runUntil("w1 ran the fixed plugin", func() bool { return count("w1") > before })
	assert.Equal(t, "ok", state("w1"))
	assert.Equal(t, []string{"problem w1:probe", "acknowledgement w1:probe", "recovery w1:probe"}, queue())
	webhookGot("problem w1:probe", "acknowledgement w1:probe", "recovery w1:probe")
	assert.NotContains(t, s.Redis.ZRange(ctx, "failed_checks", 0, -1).Val(), "w1:probe", "recovered: out of failed_checks")

	// A host-wide maintenance drains w2: its record says why it claims no
	// work (its activity slots wait: TestHostMaintenanceDrainsAndResumes),
	// and it claims again by itself when the maintenance ends.
	res = starter("maintenance", "w2", "--for", "4s", "--summary", "kernel upgrade")
	require.Equal(t, 0, res.code, res.stderr)
	assert.Contains(t, res.stdout, "(0 failing check(s) acknowledged)")
	require.Eventually(t, func() bool { return strings.Contains(notClaiming()["w2"], "kernel upgrade") }, 30*time.Second, 100*time.Millisecond, "w2 drained")
	assert.Empty(t, notClaiming()["w1"])
	require.Eventually(t, func() bool { return notClaiming()["w2"] == "" }, 30*time.Second, 100*time.Millisecond, "w2 resumed by itself")
	assert.Len(t, queue(), 3, "no more notifications")
}
