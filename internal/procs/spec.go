package procs

import (
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"time"

	"go.uber.org/zap"

	"github.com/archiveflow/archiveflow/internal/jsonl"
)

// Defaults applied by Run to zero Spec fields.
const (
	DefaultGrace         = 15 * time.Second
	DefaultLineCap       = jsonl.DefaultLineCap
	DefaultStderrLineCap = 8 << 10
	// StderrTailLines is how many last stderr lines Result.StderrTail keeps.
	StderrTailLines = 10
)

// ErrInvalidSpec marks a Spec that breaks a rule; it is never worth a retry.
var ErrInvalidSpec = errors.New("invalid hook spec")

// Spec describes one hook attempt. The caller builds every value; the
// runner adds only the MarkerEnv entry to Env.
type Spec struct {
	Path       string        // the hook executable, absolute
	Args       []string      // arguments after argv0 (e.g. --url=URL --snapshot-id=ID); never through a shell
	Env        []string      // the complete environment, KEY=VALUE
	Dir        string        // working directory (SNAP_DIR/PLUGIN), absolute; created if missing
	Stem       string        // hook file name without extension; names the runner files
	AttemptID  string        // 32 lower-case hex characters; generated when empty
	Timeout    time.Duration // run-time deadline; 0 = none (background hooks)
	Grace      time.Duration // SIGTERM → SIGKILL delay; 0 = DefaultGrace
	Background bool          // background hook: a stop by ctx (the seal) is a normal end
	LineCap    int           // max bytes of one stdout line; 0 = DefaultLineCap; longer lines are dropped
	// StderrLineCap is the max bytes of one stderr line passed to OnStderr;
	// longer lines are truncated. 0 = DefaultStderrLineCap.
	StderrLineCap int
	// SnapshotID is the snapshot the hook runs for: a Snapshot record
	// updating another id is ignored ("" = no check).
	SnapshotID string
	// OnRecord is called live, in stdout order, for each valid record. It
	// must not block for long: it paces the stdout reader, not the hook.
	OnRecord func(jsonl.Record)
	// OnStderr is called live for each stderr line (valid UTF-8, capped).
	// It may run concurrently with OnRecord, never with itself.
	OnStderr func(line string)
	// OnReady is called once, at the hook's first line of stdout, before
	// that line reaches OnRecord: a background hook is ready then (abx-dl
	// starts the next hook once a background hook has printed).
	OnReady func()
	// Limits are the attempt's resource limits (none by default).
	Limits Limits
	// NoRunnerFiles (RunFunc only): the attempt's stdout and stderr are
	// parsed for the callbacks and the result as usual but kept in no
	// runner file, and Dir is not created (the hook creates it when it
	// writes an output). For a crawl page's in-process built-ins, whose
	// records reach the page's index and the frontier: the files cost
	// more than the page's own work (docs/benchmarks.md §29).
	NoRunnerFiles bool
	Log           *zap.Logger
}

// normalize validates s and fills defaults.
func (s Spec) normalize() (Spec, error) {
	bad := func(format string, a ...any) (Spec, error) {
		return Spec{}, fmt.Errorf("%w: %s", ErrInvalidSpec, fmt.Sprintf(format, a...))
	}
	switch {
	case s.Path == "" || !filepath.IsAbs(s.Path):
		return bad("path %q: must be an absolute path to an executable", s.Path)
	case s.Dir == "" || !filepath.IsAbs(s.Dir):
		return bad("dir %q: must be an absolute path", s.Dir)
	case s.Stem == "" || strings.ContainsAny(s.Stem, "/\x00") || s.Stem == "." || s.Stem == "..":
		return bad("stem %q: must be a non-empty file name without '/'", s.Stem)
	case s.AttemptID != "" && !ValidAttemptID(s.AttemptID):
		return bad("attempt ID %q: must be 32 lower-case hex characters", s.AttemptID)
	case s.Timeout < 0:
		return bad("timeout %s: must be >= 0 (0 = no deadline)", s.Timeout)
	case s.Grace < 0:
		return bad("grace %s: must be >= 0 (0 = default %s)", s.Grace, DefaultGrace)
	case s.LineCap < 0:
		return bad("line cap %d: must be >= 0 (0 = default %d)", s.LineCap, DefaultLineCap)
	case s.StderrLineCap < 0:
		return bad("stderr line cap %d: must be >= 0 (0 = default %d)", s.StderrLineCap, DefaultStderrLineCap)
	}
	if err := s.Limits.validate(); err != nil {
		return bad("%v", err)
	}
	for _, kv := range s.Env {
		if !strings.Contains(kv, "=") {
			return bad("env entry %q: must be KEY=VALUE", kv)
		}
	}
	if s.AttemptID == "" {
		id, err := NewAttemptID()
		if err != nil {
			return Spec{}, err
		}
		s.AttemptID = id
	}
	if s.Grace == 0 {
		s.Grace = DefaultGrace
	}
	if s.LineCap == 0 {
		s.LineCap = DefaultLineCap
	}
	if s.StderrLineCap == 0 {
		s.StderrLineCap = DefaultStderrLineCap
	}
	if s.Log == nil {
		s.Log = zap.NewNop()
	}
	return s, nil
}

// env returns the hook environment: Spec.Env without any inherited marker,
// plus MarkerEnv=AttemptID.
func (s Spec) env() []string {
	out := make([]string, 0, len(s.Env)+1)
	for _, kv := range s.Env {
		if !strings.HasPrefix(kv, MarkerEnv+"=") {
			out = append(out, kv)
		}
	}
	return append(out, MarkerEnv+"="+s.AttemptID)
}
