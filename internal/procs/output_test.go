package procs

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/archiveflow/archiveflow/internal/jsonl"
	"github.com/archiveflow/archiveflow/internal/model"
)

func TestLinesInvalidNonJSONOversizeAndNonUTF8(t *testing.T) {
	t.Parallel()
	s := specFor(t, writeHook(t, "mixed.sh", `echo 'plain text'
echo '{"no_type":1}'
echo '{"type":"Crawl"}'
echo '{"type":"ArchiveResult","status":"bogus"}'
echo '{"type":"Tag","name":"first"}'
printf '{"type":"Tag","name":"%070d"}\n' 0
printf '\377\376 garbage \200\n'
printf '{"type":"Tag","name":"caf\351"}\n'
echo
printf '{"type":"Snapshot","url":"https://example.com/next","depth":1}'`))
	s.LineCap = 64
	var got []jsonl.Record
	s.OnRecord = func(r jsonl.Record) { got = append(got, r) }
	res := runSpec(t, s)

	assert.Equal(t, Counts{Records: 3, Ignored: 3, Unknown: 1, Invalid: 1, Oversize: 1}, res.Counts)
	require.Len(t, got, 3)
	assert.Equal(t, "first", got[0].Tag.Name)
	assert.True(t, utf8.ValidString(got[1].Tag.Name), "non-UTF-8 bytes are replaced, not fatal")
	assert.Equal(t, "caf\uFFFD", got[1].Tag.Name)
	assert.Equal(t, &jsonl.Snapshot{URL: "https://example.com/next", Depth: 1}, got[2].Snapshot, "an unterminated last line is parsed")
	assert.Equal(t, model.StatusNoResults, res.Status, "the invalid ArchiveResult does not count")
}

func TestLineOverDefaultCapIsDropped(t *testing.T) {
	t.Parallel()
	s := specFor(t, writeHook(t, "long.sh", `printf '{"type":"Tag","name":"'
head -c 2097152 /dev/zero | tr '\0' 'a'
printf '"}\n'
echo '{"type":"ArchiveResult","status":"succeeded","output_str":"after"}'`))
	res := runSpec(t, s)
	assert.Equal(t, int64(1), res.Counts.Oversize)
	assert.Equal(t, int64(1), res.Counts.Records)
	assert.Equal(t, model.StatusSucceeded, res.Status)
	assert.Equal(t, "after", res.Last.OutputStr)
}

func TestRecordsAreParsedLive(t *testing.T) {
	t.Parallel()
	// The hook blocks until the test, from OnRecord, releases it: this only
	// terminates if records are delivered while the hook runs.
	s := specFor(t, writeHook(t, "live.sh", `echo '{"type":"Tag","name":"ping"}'
while [ ! -e release ]; do sleep 0.01; done
echo '{"type":"ArchiveResult","status":"succeeded"}'`))
	var mu sync.Mutex
	var types []jsonl.Type
	var stderrLines []string
	s.OnRecord = func(r jsonl.Record) {
		mu.Lock()
		types = append(types, r.Type)
		mu.Unlock()
		if r.Type == jsonl.TypeTag {
			assert.NoError(t, os.WriteFile(filepath.Join(s.Dir, "release"), nil, 0o644))
		}
	}
	s.OnStderr = func(l string) { stderrLines = append(stderrLines, l) }
	res := runSpec(t, s)
	assert.Equal(t, model.StatusSucceeded, res.Status)
	assert.Equal(t, []jsonl.Type{jsonl.TypeTag, jsonl.TypeArchiveResult}, types)
	assert.Empty(t, stderrLines)
}

// A hook is ready at its first line of stdout, whatever it is, once: the
// hook only goes on once OnReady, not a record, released it.
func TestReadyAtTheFirstLineOfStdout(t *testing.T) {
	t.Parallel()
	s := specFor(t, writeHook(t, "daemon.sh", `echo "listening on 9222"
while [ ! -e release ]; do sleep 0.01; done
echo '{"type":"ArchiveResult","status":"succeeded"}'`))
	var ready atomic.Int32
	s.OnReady = func() {
		ready.Add(1)
		assert.NoError(t, os.WriteFile(filepath.Join(s.Dir, "release"), nil, 0o644))
	}
	res := runSpec(t, s)
	assert.Equal(t, model.StatusSucceeded, res.Status)
	assert.EqualValues(t, 1, ready.Load())

	quiet := specFor(t, writeHook(t, "quiet.sh", `echo nothing >&2`))
	quiet.OnReady = func() { t.Error("a hook that prints nothing on stdout is never ready") }
	runSpec(t, quiet)
}

func TestStderrLinesCappedAndValidUTF8(t *testing.T) {
	t.Parallel()
	s := specFor(t, writeHook(t, "err.sh", `echo 'one' >&2
printf 'bad \377 byte\n' >&2
printf '%0100d\n' 0 >&2`))
	s.StderrLineCap = 20
	var lines []string
	s.OnStderr = func(l string) { lines = append(lines, l) }
	res := runSpec(t, s)
	require.Equal(t, []string{"one", "bad \uFFFD byte", strings.Repeat("0", 20) + " [truncated]"}, lines)
	assert.Equal(t, int64(3), res.Counts.StderrLines)
	b, err := os.ReadFile(res.Files.Stderr)
	require.NoError(t, err)
	assert.True(t, bytes.Contains(b, []byte("bad \377 byte")), "the stderr file keeps the raw bytes")
}

// TestSnapshotTitleTagsAndUnknownRecords: a Snapshot record without a url
// sets the snapshot's title (the last one wins; one naming another
// snapshot's id is left out), Tag records become its tags, each once, and
// records of an unknown type are counted and kept in the stdout log.
func TestSnapshotTitleTagsAndUnknownRecords(t *testing.T) {
	t.Parallel()
	s := specFor(t, writeHook(t, "recs.sh", `echo '{"type":"Snapshot","id":"snap-1","title":"First"}'
echo '{"type":"Snapshot","url":"https://e.com/out","title":"Not the snapshot"}'
echo '{"type":"Tag","name":"sci-fi"}'
echo '{"type":"Persona","name":"alice"}'
echo '{"type":"Snapshot","title":"Second"}'
echo '{"type":"Snapshot","id":"snap-2","title":"Another snapshot"}'
echo '{"type":"Tag","name":"news"}'
echo '{"type":"Tag","name":"sci-fi"}'
echo '{"type":"Crawl","urls":["x"]}'
echo '{"type":"ArchiveResult","status":"succeeded"}'`))
	s.SnapshotID = "snap-1"
	res := runSpec(t, s)
	assert.Equal(t, "Second", res.Title)
	assert.Equal(t, []string{"news", "sci-fi"}, res.Tags)
	assert.Equal(t, int64(2), res.Counts.Unknown)
	assert.Zero(t, res.Counts.Ignored)
	ar := res.ArchiveResult()
	assert.Equal(t, "Second", ar.Title)
	assert.Equal(t, []string{"news", "sci-fi"}, ar.Tags)
	assert.Equal(t, int64(2), ar.Unknown)
	b, err := os.ReadFile(res.Files.Stdout)
	require.NoError(t, err)
	assert.Contains(t, string(b), `{"type":"Persona","name":"alice"}`, "an unknown record is kept as printed")
}

func TestResponsesSummary(t *testing.T) {
	t.Parallel()
	s := specFor(t, writeHook(t, "resp.sh", `echo '{"type":"Response","url":"https://e.com/","status":200,"bytes":100}'
echo '{"type":"Response","url":"https://e.com/a","status":404,"bytes":10}'
echo '{"type":"Response","url":"https://e.com/b","status":0}'
echo '{"type":"Response","url":"https://e.com/c","status":301,"bytes":1}'
echo '{"type":"ArchiveResult","status":"succeeded"}'`))
	res := runSpec(t, s)
	assert.Equal(t, ResponseSummary{ResponseCounts: model.ResponseCounts{Count: 4, R2xx: 1, R3xx: 1, R4xx: 1, Runk: 1, Errors: 2, Bytes: 111}}, res.Responses)
}

func TestRunnerFilesNamesAndContents(t *testing.T) {
	t.Parallel()
	s := specFor(t, writeHook(t, "on_Snapshot__50_files.sh", `echo '{"type":"Tag","name":"t"}'
echo "to stderr" >&2
while [ ! -e release ]; do sleep 0.01; done`))
	s.Args = append(s.Args, "--extra=it's a \"quoted\" arg", "plain")
	s.AttemptID = "0123456789abcdef0123456789abcdef"
	files := runnerFiles(s.Dir, s.Stem, s.AttemptID)

	done := make(chan Result, 1)
	before := time.Now()
	go func() {
		res, err := Run(context.Background(), s)
		assert.NoError(t, err)
		done <- res
	}()
	var pf pidFile
	require.Eventually(t, func() bool {
		b, err := os.ReadFile(files.PID)
		if err != nil {
			return false
		}
		pf, err = parsePIDFile(b)
		return err == nil
	}, testDeadline, 5*time.Millisecond)
	st, err := readStat(pf.Proc.PID)
	require.NoError(t, err)
	assert.Equal(t, st.StartTime, pf.Proc.StartTime)
	assert.Equal(t, pf.Proc.PID, st.PGID, "the hook leads its own process group")
	argv := append([]string{s.Path}, s.Args...)
	assert.Equal(t, argv, pf.Cmdline, "the executed argv")
	assert.Eventually(t, func() bool {
		cmd, err := readCmdline(pf.Proc.PID)
		return err == nil && assert.ObjectsAreEqual(append([]string{"/bin/sh"}, argv...), cmd)
	}, testDeadline, 5*time.Millisecond, "the kernel shows the interpreter, then the recorded argv")
	assert.True(t, matches(pf), "the sweeper recognises the live hook from its pid file")
	assert.Equal(t, selfRef(), pf.Owner)
	raw, err := os.ReadFile(files.PID)
	require.NoError(t, err)
	assert.True(t, strings.HasPrefix(string(raw), strconv.Itoa(pf.Proc.PID)+"\n"), "first line is the bare pid")
	info, err := os.Stat(files.PID)
	require.NoError(t, err)
	assert.WithinDuration(t, before, info.ModTime(), time.Minute, "mtime is the start time")

	require.NoError(t, os.WriteFile(filepath.Join(s.Dir, "release"), nil, 0o644))
	res := <-done

	assert.Equal(t, files, res.Files)
	assert.Equal(t, s.AttemptID, res.AttemptID)
	nameRe := regexp.MustCompile(`^on_Snapshot__50_files\.0123456789abcdef0123456789abcdef\.(stdout\.log|stderr\.log|pid|sh)$`)
	for _, p := range []string{files.Stdout, files.Stderr, files.PID, files.Sh} {
		assert.Equal(t, s.Dir, filepath.Dir(p))
		assert.Regexp(t, nameRe, filepath.Base(p))
	}
	_, err = os.Stat(files.PID)
	assert.ErrorIs(t, err, os.ErrNotExist, "the pid file is removed when the attempt ends")
	stdout, err := os.ReadFile(files.Stdout)
	require.NoError(t, err)
	assert.Equal(t, "{\"type\":\"Tag\",\"name\":\"t\"}\n", string(stdout))
	stderr, err := os.ReadFile(files.Stderr)
	require.NoError(t, err)
	assert.Equal(t, "to stderr\n", string(stderr))
	sh, err := os.ReadFile(files.Sh)
	require.NoError(t, err)
	assert.Contains(t, string(sh), "cd "+s.Dir+" || exit 1\n")
	assert.Contains(t, string(sh), "exec "+s.Path+" --url=https://example.com/ --snapshot-id=snap1 '--extra=it'\\''s a \"quoted\" arg' plain\n")
}

func TestShellQuoteRoundTrip(t *testing.T) {
	args := []string{"plain", "with space", "it's", `dq"`, "", "$HOME", "a\nb", "--url=https://e.com/?a=1&b=2"}
	out, err := execShell(t, "printf '%s\\0' "+shellCommand(args))
	require.NoError(t, err)
	assert.Equal(t, args, strings.Split(strings.TrimSuffix(out, "\x00"), "\x00"))
}

func execShell(t *testing.T, script string) (string, error) {
	t.Helper()
	hook := writeHook(t, "q.sh", script)
	s := specFor(t, hook)
	s.Args = nil
	res := runSpec(t, s)
	b, err := os.ReadFile(res.Files.Stdout)
	return string(b), err
}

func TestOutputsExcludeRunnerFiles(t *testing.T) {
	t.Parallel()
	s := specFor(t, writeHook(t, "out.sh", `printf 'hello' > index.html
mkdir -p assets && printf '0123456789' > assets/app.js
: > empty.txt
ln -s index.html link.html
printf 'old' > on_Snapshot__10_old.ffffffffffffffffffffffffffffffff.stdout.log
printf 'x' > not_runner.ABCDEF0123456789abcdef0123456789.pid
echo '{"type":"ArchiveResult","status":"succeeded","output_str":"index.html"}'`))
	res := runSpec(t, s)
	assert.Equal(t, []model.OutputFile{
		{Path: "assets/app.js", Size: 10},
		{Path: "empty.txt", Size: 0},
		{Path: "index.html", Size: 5},
		{Path: "not_runner.ABCDEF0123456789abcdef0123456789.pid", Size: 1},
	}, res.Outputs)
	assert.Equal(t, int64(16), res.OutputBytes)
	ar := res.ArchiveResult()
	assert.Equal(t, res.Outputs, ar.Outputs)
	assert.Equal(t, int64(16), ar.OutputBytes)
}

func TestArchiveBoxShapedHook(t *testing.T) {
	t.Parallel()
	hook := writeHook(t, "on_Snapshot__30_title.sh", `set -eu
: "${SNAP_DIR:?}" "${EXTRA_CONTEXT:?}" "${PLUGIN_TIMEOUT:?}"
url=""
for a in "$@"; do case "$a" in --url=*) url="${a#--url=}";; esac; done
echo "fetching $url with timeout $PLUGIN_TIMEOUT" >&2
[ "$(pwd)" = "$SNAP_DIR/title" ] || { echo "wrong cwd $(pwd)" >&2; exit 2; }
printf '%s' "$EXTRA_CONTEXT" > context.json
printf 'Example Domain' > title.txt
echo '{"type":"ArchiveResult","status":"succeeded","output_str":"title.txt","output_json":{"title":"Example Domain"}}'`)
	snap := t.TempDir()
	s := specFor(t, hook)
	s.Dir = filepath.Join(snap, "title")
	extra := `{"snapshot_id":"snap1","ident":"abc","plugin":"title","hook_name":"on_Snapshot__30_title.sh","attempt":1}`
	s.Env = append(s.Env, "SNAP_DIR="+snap, "EXTRA_CONTEXT="+extra, "PLUGIN_TIMEOUT=60")
	var stderr []string
	s.OnStderr = func(l string) { stderr = append(stderr, l) }
	res := runSpec(t, s)
	require.Equal(t, model.StatusSucceeded, res.Status, "%s; stderr %v", res.Reason, res.StderrTail)
	assert.Equal(t, "title.txt", res.Last.OutputStr)
	assert.JSONEq(t, `{"title":"Example Domain"}`, string(res.Last.OutputJSON))
	assert.Equal(t, []string{"fetching https://example.com/ with timeout 60"}, stderr)
	ctx, err := os.ReadFile(filepath.Join(s.Dir, "context.json"))
	require.NoError(t, err)
	assert.True(t, json.Valid(ctx))
	assert.Equal(t, []model.OutputFile{{Path: "context.json", Size: int64(len(extra))}, {Path: "title.txt", Size: 14}}, res.Outputs)
}

func TestMarkerEnvIsSetAndOverridesInherited(t *testing.T) {
	t.Parallel()
	s := specFor(t, writeHook(t, "env.sh", `printf '%s' "$ARCHIVEFLOW_ATTEMPT_ID" > marker`))
	s.Env = append(s.Env, MarkerEnv+"=ffffffffffffffffffffffffffffffff")
	res := runSpec(t, s)
	b, err := os.ReadFile(filepath.Join(s.Dir, "marker"))
	require.NoError(t, err)
	assert.Equal(t, res.AttemptID, string(b))
	assert.True(t, ValidAttemptID(res.AttemptID), "generated ID %q", res.AttemptID)
}
