package procs

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestSpecValidation(t *testing.T) {
	valid := Spec{Path: "/bin/true", Dir: "/tmp/x", Stem: "hook"}
	tests := []struct {
		name   string
		mutate func(*Spec)
		msg    string
	}{
		{"relative path", func(s *Spec) { s.Path = "bin/true" }, `path "bin/true": must be an absolute path`},
		{"empty dir", func(s *Spec) { s.Dir = "" }, `dir "": must be an absolute path`},
		{"stem with slash", func(s *Spec) { s.Stem = "a/b" }, `stem "a/b": must be a non-empty file name`},
		{"empty stem", func(s *Spec) { s.Stem = "" }, `stem "": must be a non-empty file name`},
		{"upper-case attempt ID", func(s *Spec) { s.AttemptID = "0123456789ABCDEF0123456789abcdef" }, "must be 32 lower-case hex characters"},
		{"short attempt ID", func(s *Spec) { s.AttemptID = "abc" }, `attempt ID "abc"`},
		{"negative timeout", func(s *Spec) { s.Timeout = -time.Second }, "timeout -1s: must be >= 0"},
		{"negative grace", func(s *Spec) { s.Grace = -time.Second }, "grace -1s: must be >= 0"},
		{"negative line cap", func(s *Spec) { s.LineCap = -1 }, "line cap -1: must be >= 0"},
		{"negative stderr cap", func(s *Spec) { s.StderrLineCap = -1 }, "stderr line cap -1"},
		{"env without =", func(s *Spec) { s.Env = []string{"FOO"} }, `env entry "FOO": must be KEY=VALUE`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := valid
			tc.mutate(&s)
			_, err := Run(context.Background(), s)
			require.ErrorIs(t, err, ErrInvalidSpec)
			assert.Contains(t, err.Error(), tc.msg)
			assert.True(t, IsPermanent(err))
		})
	}
}

func TestSpecDefaults(t *testing.T) {
	s, err := Spec{Path: "/bin/true", Dir: "/tmp/x", Stem: "hook"}.normalize()
	require.NoError(t, err)
	assert.True(t, ValidAttemptID(s.AttemptID))
	assert.Equal(t, DefaultGrace, s.Grace)
	assert.Equal(t, DefaultLineCap, s.LineCap)
	assert.Equal(t, DefaultStderrLineCap, s.StderrLineCap)
	assert.NotNil(t, s.Log)
}

func TestStartFailures(t *testing.T) {
	dir := t.TempDir()
	notExec := filepath.Join(dir, "notexec.sh")
	require.NoError(t, os.WriteFile(notExec, []byte("#!/bin/sh\n"), 0o644))
	for name, path := range map[string]string{"missing": filepath.Join(dir, "missing.sh"), "not executable": notExec} {
		t.Run(name, func(t *testing.T) {
			s := specFor(t, path)
			_, err := Run(context.Background(), s)
			require.Error(t, err)
			assert.Contains(t, err.Error(), "run hook")
			assert.Contains(t, err.Error(), path)
			assert.True(t, IsPermanent(err), "%v", err)
		})
	}
}

func TestCanceledContextDoesNotStart(t *testing.T) {
	s := specFor(t, writeHook(t, "h.sh", "touch started"))
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err := Run(ctx, s)
	require.ErrorIs(t, err, context.Canceled)
	assert.False(t, IsPermanent(err))
	assert.NoDirExists(t, s.Dir, "nothing is created for a hook that never starts")
}

func TestReusedAttemptIDRefused(t *testing.T) {
	s := specFor(t, writeHook(t, "h.sh", "exit 0"))
	s.AttemptID = "abcdefabcdefabcdefabcdefabcdefab"
	runSpec(t, s)
	_, err := Run(context.Background(), s)
	require.Error(t, err, "a second attempt with the same ID would mix output files")
	assert.Contains(t, err.Error(), "create output file")
}

func TestParseStat(t *testing.T) {
	line := []byte("4242 (a (weird) name) S 1 4242 4242 0 -1 4194560 100 0 0 0 0 0 0 0 20 0 1 0 987654 1000 10 18446744073709551615\n")
	st, err := parseStat(line)
	require.NoError(t, err)
	assert.Equal(t, procStat{State: 'S', PPID: 1, PGID: 4242, Flags: 4194560, StartTime: 987654}, st)
	_, err = parseStat([]byte("garbage"))
	require.Error(t, err)
	_, err = parseStat([]byte("1 (x) S 1 2"))
	require.Error(t, err)
}

func TestPIDFileRoundTrip(t *testing.T) {
	pf := pidFile{Proc: procRef{PID: 12, StartTime: 34}, Cmdline: []string{"/bin/sh", "a b", "c\"d"}, Owner: procRef{PID: 5, StartTime: 6}}
	b, err := pf.encode()
	require.NoError(t, err)
	got, err := parsePIDFile(b)
	require.NoError(t, err)
	assert.Equal(t, pf, got)
	for _, bad := range []string{"", "12\n", "12\nstarttime x\ncmdline []\n", "12\nstarttime 1\ncmdline nope\n", "-3\nstarttime 1\ncmdline []\n"} {
		_, err := parsePIDFile([]byte(bad))
		assert.Error(t, err, "%q", bad)
	}
}

func TestIsRunnerFile(t *testing.T) {
	tests := map[string]bool{
		"on_Snapshot__10_wget.0123456789abcdef0123456789abcdef.stdout.log": true,
		"x.0123456789abcdef0123456789abcdef.stderr.log":                    true,
		"/a/b/x.y.0123456789abcdef0123456789abcdef.pid":                    true,
		"x.0123456789abcdef0123456789abcdef.sh":                            true,
		"x.0123456789ABCDEF0123456789abcdef.sh":                            false,
		"x.0123456789abcdef0123456789abcde.sh":                             false,
		".0123456789abcdef0123456789abcdef.sh":                             false,
		"x.0123456789abcdef0123456789abcdef.log":                           false,
		"index.html":                                                       false,
	}
	for name, want := range tests {
		assert.Equal(t, want, IsRunnerFile(name), name)
	}
	f, ok := ParseRunnerFile("/a/b/on_Snapshot__10_wget.bg.0123456789abcdef0123456789abcdef.stdout.log")
	require.True(t, ok)
	assert.Equal(t, RunnerFile{Stem: "on_Snapshot__10_wget.bg", AttemptID: "0123456789abcdef0123456789abcdef", Suffix: SuffixStdout}, f)
}
