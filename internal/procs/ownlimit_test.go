package procs

import (
	"encoding/json"
	"fmt"
	"os"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/archiveflow/archiveflow/internal/model"
)

// ownLimitEnv makes TestOwnMemoryLimitHelper print what OwnMemoryLimit
// sees as its ArchiveResult: this test binary runs as the hook.
const ownLimitEnv = "PROCS_TEST_OWN_MEMORY_LIMIT"

type ownLimit struct {
	Limit      int64
	PerProcess bool
	Cgroup     bool
	OOMKills   int64
}

func TestOwnMemoryLimitHelper(t *testing.T) {
	if os.Getenv(ownLimitEnv) == "" {
		t.Skip("run as a hook by TestOwnMemoryLimit")
	}
	m := OwnMemoryLimit()
	b, err := json.Marshal(ownLimit{Limit: m.Limit, PerProcess: m.PerProcess(), Cgroup: m.Cgroup != "", OOMKills: m.OOMKills()})
	require.NoError(t, err)
	fmt.Printf("{\"type\":\"ArchiveResult\",\"status\":\"succeeded\",\"output_json\":%s}\n", b)
}

// A hook sees the memory limit the runner gave it: RLIMIT_DATA without a
// cgroup, its own cgroup's limit with one.
func TestOwnMemoryLimit(t *testing.T) {
	bin, err := os.Executable()
	require.NoError(t, err)
	const limit = 1 << 30
	run := func(t *testing.T, l Limits) ownLimit {
		s := specFor(t, bin)
		s.Args = []string{"-test.run=^TestOwnMemoryLimitHelper$"}
		s.Env = append(s.Env, ownLimitEnv+"=1")
		s.Limits = l
		res := runSpec(t, s)
		require.Equal(t, model.StatusSucceeded, res.Status, "%s; stderr: %v", res.Reason, res.StderrTail)
		var got ownLimit
		require.NoError(t, json.Unmarshal(res.Last.OutputJSON, &got))
		return got
	}
	t.Run("rlimit", func(t *testing.T) {
		assert.Equal(t, ownLimit{Limit: limit, PerProcess: true}, run(t, Limits{Memory: limit, Cgroup: CgroupNone}))
	})
	t.Run("cgroup", func(t *testing.T) {
		l := Limits{Memory: limit}
		requireCgroups(t, l)
		assert.Equal(t, ownLimit{Limit: limit, Cgroup: true}, run(t, l))
	})
	t.Run("none", func(t *testing.T) {
		got := run(t, Limits{OpenFiles: 1024})
		assert.Zero(t, got.Limit, "no memory limit (the test's own RLIMIT_DATA is unlimited)")
	})
}
