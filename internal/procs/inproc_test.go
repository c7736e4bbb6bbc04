package procs

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/archiveflow/archiveflow/internal/jsonl"
	"github.com/archiveflow/archiveflow/internal/model"
)

func inprocSpec(t *testing.T) Spec {
	dir := t.TempDir()
	return Spec{Path: filepath.Join(dir, "on_Snapshot__10_x.sh"), Dir: filepath.Join(dir, "x"), Stem: "on_Snapshot__10_x", Grace: 200 * time.Millisecond}
}

func TestRunFuncSameContractAsAProcess(t *testing.T) {
	spec := inprocSpec(t)
	var recs []jsonl.Type
	var lines []string
	spec.OnRecord = func(r jsonl.Record) { recs = append(recs, r.Type) }
	spec.OnStderr = func(l string) { lines = append(lines, l) }
	res, err := RunFunc(context.Background(), spec, func(ctx context.Context, dir string, stdout, stderr io.Writer) int {
		require.NoError(t, os.WriteFile(filepath.Join(dir, "out.txt"), []byte("hello"), 0o644))
		fmt.Fprintln(stdout, `{"type":"Response","url":"http://x/","status":200,"bytes":5}`)
		fmt.Fprintln(stdout, `{"type":"Snapshot","url":"http://x/a"}`)
		fmt.Fprint(stdout, `not json`+"\n")
		fmt.Fprintln(stderr, "working")
		fmt.Fprintln(stdout, `{"type":"ArchiveResult","status":"succeeded","output_str":"ok"}`)
		return 0
	})
	require.NoError(t, err)
	assert.Equal(t, model.StatusSucceeded, res.Status)
	assert.Equal(t, []jsonl.Type{jsonl.TypeResponse, jsonl.TypeSnapshot, jsonl.TypeArchiveResult}, recs)
	assert.Equal(t, []string{"working"}, lines)
	assert.Equal(t, int64(1), res.Counts.Ignored)
	assert.Equal(t, []model.OutputFile{{Path: "out.txt", Size: 5}}, res.Outputs, "runner files are not outputs")
	b, err := os.ReadFile(res.Files.Stdout)
	require.NoError(t, err)
	assert.Contains(t, string(b), "not json", "stdout is kept byte for byte")
	assert.True(t, IsRunnerFile(res.Files.Stderr))
	b, err = os.ReadFile(res.Files.Stderr)
	require.NoError(t, err)
	assert.Equal(t, "working\n", string(b))
}

// An in-process hook's runner logs are created at their first byte: a
// stream the hook wrote nothing to leaves no file.
func TestRunFuncCreatesALogOnlyForAStreamWrittenTo(t *testing.T) {
	spec := inprocSpec(t)
	res, err := RunFunc(context.Background(), spec, func(ctx context.Context, dir string, stdout, stderr io.Writer) int {
		fmt.Fprintln(stdout, `{"type":"ArchiveResult","status":"succeeded","output_str":"ok"}`)
		return 0
	})
	require.NoError(t, err)
	assert.Equal(t, model.StatusSucceeded, res.Status)
	assert.FileExists(t, res.Files.Stdout)
	assert.NoFileExists(t, res.Files.Stderr)
	entries, err := os.ReadDir(spec.Dir)
	require.NoError(t, err)
	assert.Len(t, entries, 1, "the stdout log alone")

	spec = inprocSpec(t)
	res, err = RunFunc(context.Background(), spec, func(context.Context, string, io.Writer, io.Writer) int { return 0 })
	require.NoError(t, err)
	assert.Equal(t, model.StatusNoResults, res.Status)
	entries, err = os.ReadDir(spec.Dir)
	require.NoError(t, err)
	assert.Empty(t, entries, "nothing written, no log; the hook's directory is there")
}

// TestRunFuncWithoutRunnerFiles: under NoRunnerFiles the streams reach the
// callbacks and the result, and no file or directory is made; Run refuses
// it (a process's output is its runner files).
func TestRunFuncWithoutRunnerFiles(t *testing.T) {
	spec := inprocSpec(t)
	spec.NoRunnerFiles = true
	var links []string
	spec.OnRecord = func(r jsonl.Record) {
		if r.Snapshot != nil {
			links = append(links, r.Snapshot.URL)
		}
	}
	var lines []string
	spec.OnStderr = func(l string) { lines = append(lines, l) }
	res, err := RunFunc(context.Background(), spec, func(ctx context.Context, dir string, stdout, stderr io.Writer) int {
		fmt.Fprintln(stdout, `{"type":"Snapshot","url":"http://x/a"}`)
		fmt.Fprintln(stderr, "a notice")
		fmt.Fprintln(stdout, `{"type":"ArchiveResult","status":"failed","error":"no"}`)
		return 0
	})
	require.NoError(t, err)
	assert.Equal(t, model.StatusFailed, res.Status)
	assert.Equal(t, []string{"http://x/a"}, links)
	assert.Equal(t, []string{"a notice"}, lines)
	assert.Equal(t, []string{"a notice"}, res.StderrTail)
	assert.Equal(t, Files{}, res.Files)
	assert.NoDirExists(t, spec.Dir, "no runner files, and the hook wrote no output")

	_, err = Run(context.Background(), spec)
	assert.ErrorIs(t, err, ErrInvalidSpec)
}

func TestRunFuncExitMapping(t *testing.T) {
	for _, c := range []struct {
		code      int
		status    model.Status
		transient bool
	}{{0, model.StatusNoResults, false}, {10, model.StatusSkipped, false}, {1, "", true}} {
		res, err := RunFunc(context.Background(), inprocSpec(t), func(context.Context, string, io.Writer, io.Writer) int { return c.code })
		require.NoError(t, err)
		assert.Equal(t, c.status, res.Status, "exit %d", c.code)
		assert.Equal(t, c.transient, res.Transient, "exit %d", c.code)
	}
	res, err := RunFunc(context.Background(), inprocSpec(t), func(context.Context, string, io.Writer, io.Writer) int { panic("boom") })
	require.NoError(t, err)
	assert.True(t, res.Transient, "a panic is a crash: transient")
	assert.Contains(t, res.StderrTail[0], "boom")
}

func TestRunFuncTimeoutAndAbandon(t *testing.T) {
	spec := inprocSpec(t)
	spec.Timeout = 50 * time.Millisecond
	res, err := RunFunc(context.Background(), spec, func(ctx context.Context, _ string, _, _ io.Writer) int {
		<-ctx.Done()
		return 1
	})
	require.NoError(t, err)
	assert.True(t, res.TimedOut)
	assert.True(t, res.Transient)

	stuck := make(chan struct{})
	defer close(stuck)
	spec = inprocSpec(t)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err = RunFunc(ctx, spec, func(context.Context, string, io.Writer, io.Writer) int { return 0 })
	require.Error(t, err, "a cancelled attempt does not start")
	ctx, cancel = context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	res, err = RunFunc(ctx, spec, func(context.Context, string, io.Writer, io.Writer) int { <-stuck; return 0 })
	require.NoError(t, err)
	assert.True(t, res.Canceled)
	assert.Equal(t, exitSIGKILL, res.ExitCode, "abandoned after the grace")
	assert.True(t, res.Transient)
}
