package workflows_test

import (
	"os/exec"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestWorkflowsLinkNoIO guards DESIGN §10: workflow code links nothing
// that does I/O — no Redis client, no process runner, none of our
// adapters — not even through the activities' wire types it imports (the
// page batch once pulled go-redis in through hostbudget's host rule).
func TestWorkflowsLinkNoIO(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", ".").Output()
	require.NoError(t, err, "go list -deps")
	const ours = "github.com/archiveflow/archiveflow/internal/"
	banned := []string{"os/exec", "github.com/redis/go-redis/v9"}
	for _, p := range []string{"procs", "rkeys", "engine", "frontier", "hostbudget", "egress", "jobstore", "builtin", "luascript", "fleethealth", "devredis", "devserver"} {
		banned = append(banned, ours+p)
	}
	for _, dep := range strings.Fields(string(out)) {
		for _, b := range banned {
			if dep == b || strings.HasPrefix(dep, b+"/") {
				t.Errorf("workflows links %s (DESIGN §10: workflow code links nothing that does I/O)", dep)
			}
		}
	}
}
