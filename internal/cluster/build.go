//go:build dev || cluster

package cluster

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"
)

// Binaries are the executables the suite runs, built from this module
// (so the Temporal ones are at go.mod's version).
type Binaries struct {
	// Dir holds all of them; it is put first on the PATH of the schema
	// script, which calls temporal-sql-tool by name.
	Dir            string
	TemporalServer string
	SQLTool        string
	Workers        string
	Starter        string
	// Took is how long the build took.
	Took time.Duration
}

// packages are the main packages Build builds, by binary name.
var packages = []struct{ name, pkg string }{
	{"temporal-server", "go.temporal.io/server/cmd/server"},
	{"temporal-sql-tool", "go.temporal.io/server/cmd/tools/sql"},
	{"workers", "github.com/archiveflow/archiveflow/workers"},
	{"starter", "github.com/archiveflow/archiveflow/starter"},
}

// Build builds the Temporal server, its SQL schema tool, workers and starter
// into dir with one `go build`. The Temporal packages are `tool`
// dependencies in go.mod, pinned to the version the project builds against.
//
// No -race: these are the production binaries, and a race-built Temporal
// server is several times slower (on the shared 2-core machine it finished
// 11 of the 50-job drill's jobs in 3 minutes). Without -race the build
// reuses what `go build ./...` compiled: every Temporal server package but
// the two commands and their schema tool, so after CI's plain build step
// only those few packages compile and the binaries link; a second run of
// the suite only links.
func Build(ctx context.Context, dir string) (Binaries, error) {
	begin := time.Now()
	// `go build -o DIR/ pkg...` names each binary after its package's
	// last path element: server, sql, workers, starter.
	args := []string{"build", "-o", dir + string(filepath.Separator)}
	for _, p := range packages {
		args = append(args, p.pkg)
	}
	cmd := exec.CommandContext(ctx, "go", args...)
	cmd.Dir = moduleRoot()
	if out, err := cmd.CombinedOutput(); err != nil {
		return Binaries{}, fmt.Errorf("go %s: %w\n%s", strings.Join(args, " "), err, out)
	}
	for _, p := range packages {
		built := filepath.Join(dir, filepath.Base(p.pkg))
		if built == filepath.Join(dir, p.name) {
			continue
		}
		if err := os.Rename(built, filepath.Join(dir, p.name)); err != nil {
			return Binaries{}, fmt.Errorf("name binary %s: %w", p.name, err)
		}
	}
	return Binaries{
		Dir:            dir,
		TemporalServer: filepath.Join(dir, "temporal-server"),
		SQLTool:        filepath.Join(dir, "temporal-sql-tool"),
		Workers:        filepath.Join(dir, "workers"),
		Starter:        filepath.Join(dir, "starter"),
		Took:           time.Since(begin),
	}, nil
}

// moduleRoot is the repository root: the nearest directory above the
// working directory (a test's package directory) that holds go.mod.
func moduleRoot() string {
	wd, err := os.Getwd()
	if err != nil {
		return "."
	}
	for dir := wd; ; dir = filepath.Dir(dir) {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir
		}
		if filepath.Dir(dir) == dir {
			return wd
		}
	}
}

// RepoFile is the path of a file at the repository root, e.g.
// "docker-compose.yml".
func RepoFile(name string) string { return filepath.Join(moduleRoot(), name) }
