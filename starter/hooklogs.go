package main

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/archiveflow/archiveflow/internal/archivedir"
	"github.com/archiveflow/archiveflow/internal/procs"
)

// hookLogFile is one of a hook attempt's output files, kept by the runner
// in the snapshot directory: SNAP_DIR/PLUGIN/STEM.ATTEMPT.stdout.log and
// .stderr.log.
type hookLogFile struct {
	Plugin    string    `json:"plugin"`
	Hook      string    `json:"hook"` // the hook's file name without extension
	AttemptID string    `json:"attempt_id"`
	Stream    string    `json:"stream"` // stdout or stderr
	Path      string    `json:"path"`
	Modified  time.Time `json:"modified"`
	Content   string    `json:"content"`
}

// findHookLogs returns the stdout and stderr files of every attempt of the
// hooks NAME picks in snapDir: a plugin name (all its hooks), a hook file
// name or its stem. Attempts come oldest first, stdout before stderr.
func findHookLogs(snapDir, name string) ([]hookLogFile, error) {
	plugins, err := os.ReadDir(snapDir)
	if err != nil {
		return nil, err
	}
	stem := strings.TrimSuffix(name, filepath.Ext(name))
	var out []hookLogFile
	for _, p := range plugins {
		if !p.IsDir() {
			continue
		}
		dir := filepath.Join(snapDir, p.Name())
		entries, err := os.ReadDir(dir)
		if err != nil {
			return nil, fmt.Errorf("read %s: %w", dir, err)
		}
		for _, e := range entries {
			rf, ok := procs.ParseRunnerFile(e.Name())
			if !ok || rf.Suffix != procs.SuffixStdout && rf.Suffix != procs.SuffixStderr {
				continue
			}
			if p.Name() != name && rf.Stem != name && rf.Stem != stem {
				continue
			}
			info, err := e.Info()
			if err != nil {
				return nil, fmt.Errorf("stat %s: %w", e.Name(), err)
			}
			stream := "stdout"
			if rf.Suffix == procs.SuffixStderr {
				stream = "stderr"
			}
			out = append(out, hookLogFile{Plugin: p.Name(), Hook: rf.Stem, AttemptID: rf.AttemptID, Stream: stream,
				Path: filepath.Join(dir, e.Name()), Modified: info.ModTime()})
		}
	}
	// Attempts in the order they ran: by their first file's time.
	started := map[string]time.Time{}
	for _, f := range out {
		if t, ok := started[f.AttemptID]; !ok || f.Modified.Before(t) {
			started[f.AttemptID] = f.Modified
		}
	}
	slices.SortStableFunc(out, func(a, b hookLogFile) int {
		return cmp.Or(started[a.AttemptID].Compare(started[b.AttemptID]),
			strings.Compare(a.AttemptID, b.AttemptID),
			strings.Compare(a.Stream, b.Stream)*-1) // stdout before stderr
	})
	return out, nil
}

// runHookLogs prints one hook's stdout and stderr files (`logs --hook`).
// They live on the worker host that ran the job; from another host it
// says where they are.
func runHookLogs(ctx context.Context, a *app, inv *invocation, id, name string) error {
	archive, err := filepath.Abs(inv.cfg.ArchiveDir)
	if err != nil {
		archive = inv.cfg.ArchiveDir
	}
	snapDir := archivedir.Snapshot(archive, id)
	files, err := findHookLogs(snapDir, name)
	if errors.Is(err, fs.ErrNotExist) {
		return withCode(exitNotFound, fmt.Errorf("job %s: no snapshot directory %s on this host: hook logs stay on the worker host that ran the job, as ARCHIVE_DIR/snapshots/%s/PLUGIN/HOOK.ATTEMPT.stdout.log and .stderr.log there%s",
			id, snapDir, id, a.workerHostOf(ctx, inv, id)))
	}
	if err != nil {
		return withCode(exitUnavailable, fmt.Errorf("job %s: hook logs: %w", id, err))
	}
	if len(files) == 0 {
		return withCode(exitNotFound, fmt.Errorf("job %s: no log files of hook %q in %s (give a plugin name, a hook file name or its stem: %s)",
			id, name, snapDir, strings.Join(pluginDirs(snapDir), ", ")))
	}
	for i := range files {
		data, err := os.ReadFile(files[i].Path)
		if err != nil {
			return withCode(exitUnavailable, fmt.Errorf("job %s: read %s: %w", id, files[i].Path, err))
		}
		files[i].Content = string(data)
	}
	if inv.json {
		return writeJSON(a.stdout, map[string]any{"ident": id, "files": files})
	}
	for _, f := range files {
		fmt.Fprintf(a.stdout, "==> %s <==\n", f.Path)
		fmt.Fprint(a.stdout, f.Content)
		if f.Content != "" && !strings.HasSuffix(f.Content, "\n") {
			fmt.Fprintln(a.stdout)
		}
	}
	return nil
}

// pluginDirs lists the plugin directories of a snapshot, for messages.
func pluginDirs(snapDir string) []string {
	entries, _ := os.ReadDir(snapDir)
	var out []string
	for _, e := range entries {
		if e.IsDir() {
			out = append(out, e.Name())
		}
	}
	return out
}

// workerHostOf names the worker that ran the job, from Redis, for a
// message ("" when Redis does not say).
func (a *app) workerHostOf(ctx context.Context, inv *invocation, id string) string {
	b, err := a.connectRedis(ctx, inv)
	if err != nil {
		return ""
	}
	defer b.Close()
	v, err := b.Store.GetJob(ctx, id)
	if err != nil || v.PipelineID == "" {
		return ""
	}
	pipes, err := b.Store.ListPipelines(ctx)
	if err == nil {
		for _, p := range pipes {
			if p.ID == v.PipelineID && p.Fields["hostname"] != "" {
				return fmt.Sprintf(" (host %s, pipeline %s)", p.Fields["hostname"], v.PipelineID)
			}
		}
	}
	return fmt.Sprintf(" (pipeline %s; `starter pipelines` lists the live ones)", v.PipelineID)
}
