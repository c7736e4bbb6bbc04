//go:build dev

package e2e

import (
	"bufio"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/archiveflow/archiveflow/internal/proccheck"
)

// writeHook writes an executable sh hook ROOT/PLUGIN/NAME with body.
func writeHook(t *testing.T, root, plugin, name, body string) {
	t.Helper()
	dir := filepath.Join(root, plugin)
	require.NoError(t, os.MkdirAll(dir, 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(dir, name), []byte("#!/bin/sh\n"+body), 0o755))
}

// event is one line hooks append to $E2E_EVENTS: "NAME WHAT UNIX_NANOS".
type event struct {
	hook, what string
	at         int64
}

// recordFn is sh that appends an event line; use as `rec start`.
const recordFn = `rec() { echo "$HOOK $1 $(date +%s%N)" >> "$E2E_EVENTS"; }
`

func readEvents(t *testing.T, path string) []event {
	t.Helper()
	f, err := os.Open(path)
	require.NoError(t, err)
	defer f.Close()
	var out []event
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		parts := strings.Fields(sc.Text())
		require.Len(t, parts, 3, "event line %q", sc.Text())
		at, err := strconv.ParseInt(parts[2], 10, 64)
		require.NoError(t, err)
		out = append(out, event{hook: parts[0], what: parts[1], at: at})
	}
	require.NoError(t, sc.Err())
	sort.Slice(out, func(i, j int) bool { return out[i].at < out[j].at })
	return out
}

// find returns the time of hook's what event, failing if absent.
func find(t *testing.T, evs []event, hook, what string) int64 {
	t.Helper()
	for _, e := range evs {
		if e.hook == hook && e.what == what {
			return e.at
		}
	}
	t.Fatalf("no %q event of hook %q in %v", what, hook, evs)
	return 0
}

func has(evs []event, hook, what string) bool {
	for _, e := range evs {
		if e.hook == hook && e.what == what {
			return true
		}
	}
	return false
}

// processesWithEnv lists the PIDs of live hook processes whose
// environment holds kv (internal/proccheck).
func processesWithEnv(kv string) []int {
	var out []int
	for _, p := range proccheck.WithEnv(kv) {
		out = append(out, p.PID)
	}
	return out
}
