//go:build dev

package e2e

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/archiveflow/archiveflow/internal/model"
	"github.com/archiveflow/archiveflow/workflows"
)

// TestWorkerGracefulShutdown sends SIGTERM to the worker process running a
// hook: a hook that ends within worker.drain_timeout finishes normally; one
// that would outlast it gets SIGTERM and nothing of it survives. Either way
// the worker exits 0, and another worker completes the job.
func TestWorkerGracefulShutdown(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the workers binary")
	}
	bin := BuildWorkers(t)
	for _, tc := range []struct {
		name      string
		nap       string // how long the hook runs
		drain     string // worker.drain_timeout
		wantTerm  bool   // the hook got SIGTERM from the drain
		wantEnded bool   // the hook's first run ended by itself
	}{
		{name: "finishes within drain", nap: "2", drain: "20s", wantEnded: true},
		{name: "cancelled after drain", nap: "60", drain: "1s", wantTerm: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			root := t.TempDir()
			events := filepath.Join(t.TempDir(), "events")
			writeHook(t, root, "long", "on_Snapshot__10_long.sh", "HOOK=long\n"+recordFn+`echo "$PPID" >> "$E2E_EVENTS.owner"
trap 'rec term; exit 143' TERM
rec start
n=$(wc -l < "$E2E_EVENTS.owner")
if [ "$n" -gt 1 ]; then E2E_NAP=0; fi   # the retry on the other worker is quick
i=0; while [ "$i" -lt "$((E2E_NAP * 10))" ]; do sleep 0.1; i=$((i + 1)); done
rec end
echo '{"type":"ArchiveResult","status":"succeeded"}'
`)
			s := NewStack(t, server, root, nil)
			env := []string{"E2E_EVENTS=" + events, "E2E_NAP=" + tc.nap, "ARCHIVEFLOW_WORKER_DRAIN_TIMEOUT=" + tc.drain}
			w1 := StartWorker(t, bin, s.Config, "w1", env...)
			job := s.Submit(t, "http://127.0.0.1:1/drain-"+strings.ReplaceAll(tc.name, " ", "-"), nil)
			require.Eventually(t, func() bool {
				b, err := os.ReadFile(events + ".owner")
				return err == nil && strings.HasSuffix(string(b), "\n")
			}, 90*time.Second, 50*time.Millisecond, "hook never started")
			w2 := StartWorker(t, bin, s.Config, "w2", env...)
			_ = w2

			require.NoError(t, w1.Process.Signal(syscall.SIGTERM))
			exited := make(chan error, 1)
			go func() { exited <- w1.Wait() }()
			select {
			case err := <-exited:
				assert.NoError(t, err, "worker exits 0 after draining")
			case <-time.After(60 * time.Second):
				t.Fatal("worker did not exit within 60s of SIGTERM")
			}
			evs := readEvents(t, events)
			assert.Equal(t, tc.wantTerm, has(evs, "long", "term"), "hook got SIGTERM: %v", evs)
			if tc.wantEnded {
				assert.True(t, has(evs, "long", "end"), "hook finished during the drain: %v", evs)
			}
			owners, err := os.ReadFile(events + ".owner")
			require.NoError(t, err)
			first, err := strconv.Atoi(strings.Fields(string(owners))[0])
			require.NoError(t, err)
			assert.Equal(t, w1.Process.Pid, first)

			var st workflows.Status
			require.NoError(t, s.Wait(t, job, 3*time.Minute))
			require.NoError(t, job.Run.Get(context.Background(), &st))
			assert.Equal(t, model.StateFinished, st.State)
			require.Len(t, st.Hooks, 1)
			assert.Equal(t, model.StatusSucceeded, st.Hooks[0].Result.Status)
			assert.Empty(t, processesWithEnv("E2E_EVENTS="+events), "hook processes left running")
		})
	}
}
