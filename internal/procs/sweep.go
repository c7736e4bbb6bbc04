package procs

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"time"

	"go.uber.org/zap"
)

// SweepReport says what one SweepGrace found and did.
type SweepReport struct {
	PIDFiles int      // runner .pid files found
	Skipped  []string // pid files of attempts still supervised by a live runner
	Killed   []int    // hook pids whose process tree was terminated
	Removed  []string // stale pid files removed
	Errors   []string // per-file problems (unreadable or unparsable files are removed too)
	Cgroups  []string // stale per-hook cgroups removed
}

// SweepGrace walks root for runner .pid files. A file whose owner runner is
// still alive (another worker, or a live Run in this process) is left alone.
// Otherwise, when the recorded hook process is alive and both its start time
// and its command line match the file (so a reused pid is never hit), its
// process group and every process carrying its attempt marker are sent
// SIGTERM, then SIGKILL after grace; the marker scan also runs when the
// leader is gone, to catch children it left. The pid file is then removed.
func SweepGrace(root string, grace time.Duration, log *zap.Logger) (SweepReport, error) {
	if log == nil {
		log = zap.NewNop()
	}
	var rep SweepReport
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				return nil
			}
			return err
		}
		f, ok := ParseRunnerFile(d.Name())
		if d.IsDir() || !ok || f.Suffix != SuffixPID {
			return nil
		}
		rep.PIDFiles++
		sweepOne(path, f.AttemptID, grace, log.With(zap.String("pid_file", path), zap.String("attempt", f.AttemptID)), &rep)
		return nil
	})
	rep.Cgroups = sweepCgroups(grace, log)
	if err != nil {
		return rep, fmt.Errorf("sweep %s: %w", root, err)
	}
	return rep, nil
}

func sweepOne(path, attemptID string, grace time.Duration, log *zap.Logger, rep *SweepReport) {
	if _, running := active.Load(attemptID); running {
		rep.Skipped = append(rep.Skipped, path)
		return
	}
	b, err := os.ReadFile(path)
	if err != nil {
		rep.Errors = append(rep.Errors, fmt.Sprintf("%s: %v", path, err))
		return
	}
	pf, err := parsePIDFile(b)
	if err != nil {
		log.Warn("unparsable pid file removed", zap.Error(err))
		rep.Errors = append(rep.Errors, fmt.Sprintf("%s: %v", path, err))
		removeStale(path, log, rep)
		return
	}
	if pf.Owner.PID != 0 && pf.Owner != selfRef() && pf.Owner.alive() {
		rep.Skipped = append(rep.Skipped, path)
		return
	}
	rp := &reaper{pgid: pf.Proc.PID, marker: []byte(MarkerEnv + "=" + attemptID), minStart: pf.Proc.StartTime, grace: grace, log: log}
	if dir := filepath.Dir(path); !dirBusy(dir) {
		// The processes the crashed attempt named in its own pid files.
		rp.pidFiles = hookPIDFiles(dir, pf.Proc.StartTime, nowTicks())
	}
	if matches(pf) {
		log.Info("sweeping leftover hook", zap.Int("pid", pf.Proc.PID))
		rep.Killed = append(rep.Killed, pf.Proc.PID)
		rp.cleanup()
	} else {
		// The leader is gone and its group number may be reused: only
		// processes carrying the attempt marker are terminated.
		rp.markerOnly = true
		if n := rp.cleanup(); n > 0 {
			log.Info("swept processes of a dead hook by its marker", zap.Int("count", n))
		}
	}
	removeStale(path, log, rep)
}

// matches reports whether the process recorded in pf is alive with the same
// start time and a command line ending with the recorded argv (a script's
// cmdline starts with its interpreter).
func matches(pf pidFile) bool {
	if !pf.Proc.alive() || len(pf.Cmdline) == 0 {
		return false
	}
	cmd, err := readCmdline(pf.Proc.PID)
	return err == nil && len(cmd) >= len(pf.Cmdline) && slices.Equal(cmd[len(cmd)-len(pf.Cmdline):], pf.Cmdline)
}

func removeStale(path string, log *zap.Logger, rep *SweepReport) {
	if err := os.Remove(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
		log.Warn("remove stale pid file", zap.Error(err))
		rep.Errors = append(rep.Errors, fmt.Sprintf("%s: %v", path, err))
		return
	}
	rep.Removed = append(rep.Removed, path)
}
