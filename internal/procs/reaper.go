package procs

import (
	"errors"
	"slices"
	"time"

	"go.uber.org/zap"
	"golang.org/x/sys/unix"
)

// Bounds of the wait for processes to vanish after SIGKILL, and the poll
// interval while waiting for processes to exit.
const (
	killWait     = 5 * time.Second
	reapPollMin  = 2 * time.Millisecond
	reapPollMax  = 50 * time.Millisecond
	reapMaxRound = 5
)

// reaper terminates one hook's process tree: the process group led by the
// hook (pgid = hook pid) and any process carrying the attempt's marker in
// its environment (daemons that left the group with setsid).
type reaper struct {
	pgid     int
	marker   []byte       // "ARCHIVEFLOW_ATTEMPT_ID=<id>"
	minStart uint64       // hook start time in clock ticks; marked processes start later
	born     *birthWindow // pids of processes created since the hook started; nil = any
	grace    time.Duration
	log      *zap.Logger
	// markerOnly skips the process group: used when the group's number may
	// have been reused (the sweeper found the leader gone).
	markerOnly bool
	// members, when set, lists the pids in the hook's cgroup: all of its
	// processes, whatever their group or environment.
	members func() []int
	// pidFiles, when set, lists the processes named by the hook-written
	// .pid files of the hook's directory (hookpids.go).
	pidFiles func() []procRef
}

// signalGroup sends sig to the whole process group.
func (r *reaper) signalGroup(sig unix.Signal) {
	if r.markerOnly {
		return
	}
	if err := ignoreESRCH(unix.Kill(-r.pgid, sig)); err != nil {
		r.log.Warn("signal process group", zap.Int("pgid", r.pgid), zap.Stringer("signal", sig), zap.Error(err))
	}
}

// stopLeader ends a running hook: SIGTERM to the group, then SIGKILL to the
// group if the leader has not exited within the grace. It returns the
// leader's wait error. A leader stuck in uninterruptible sleep is waited for.
func (r *reaper) stopLeader(waitCh <-chan error, why string) error {
	r.log.Info("stopping hook", zap.String("why", why), zap.Int("pgid", r.pgid), zap.Duration("grace", r.grace))
	r.signalGroup(unix.SIGTERM)
	t := time.NewTimer(r.grace)
	defer t.Stop()
	select {
	case err := <-waitCh:
		return err
	case <-t.C:
	}
	r.log.Warn("hook ignored SIGTERM, killing process group", zap.Int("pgid", r.pgid), zap.Duration("grace", r.grace))
	r.signalGroup(unix.SIGKILL)
	return <-waitCh
}

// leftovers lists the live processes of the hook's tree: group members and
// marked processes, without duplicates.
func (r *reaper) leftovers() []procRef {
	seen := map[int]bool{}
	var out []procRef
	if !r.markerOnly && !errors.Is(unix.Kill(-r.pgid, 0), unix.ESRCH) {
		for _, p := range groupMembers(r.pgid) {
			seen[p.PID] = true
			out = append(out, p)
		}
	}
	marked, err := markedProcesses(r.marker, r.minStart, r.born)
	if err != nil {
		r.log.Warn("scan for marked processes", zap.Error(err))
	}
	for _, p := range marked {
		if !seen[p.PID] {
			seen[p.PID] = true
			out = append(out, p)
		}
	}
	if r.pidFiles != nil {
		for _, p := range r.pidFiles() {
			if !seen[p.PID] {
				seen[p.PID] = true
				out = append(out, p)
			}
		}
	}
	if r.members != nil {
		for _, pid := range r.members() {
			if st, err := readStat(pid); err == nil && !seen[pid] && st.State != 'Z' && st.State != 'X' {
				seen[pid] = true
				out = append(out, procRef{PID: pid, StartTime: st.StartTime})
			}
		}
	}
	return out
}

// cleanup terminates everything the hook left running after its leader
// exited: SIGTERM, up to grace for them to exit, then SIGKILL, rescanning
// so that processes forked meanwhile are caught too. It returns how many
// distinct processes were found alive.
func (r *reaper) cleanup() int {
	left := r.leftovers()
	if len(left) == 0 {
		return 0
	}
	found := map[int]procRef{}
	for _, p := range left {
		found[p.PID] = p
	}
	r.log.Info("terminating processes left by hook", zap.Int("count", len(left)), zap.Ints("pids", pids(left)))
	r.signalAll(left, unix.SIGTERM)
	deadline := time.Now().Add(r.grace)
	left = r.waitGone(deadline, found)
	for round := 0; len(left) > 0 && round < reapMaxRound; round++ {
		r.log.Warn("processes left by hook ignored SIGTERM, killing", zap.Ints("pids", pids(left)))
		r.signalAll(left, unix.SIGKILL)
		left = r.waitGone(time.Now().Add(killWait), found)
	}
	if len(left) > 0 {
		r.log.Error("processes left by hook survived SIGKILL", zap.Ints("pids", pids(left)))
	}
	return len(found)
}

// signalAll signals the group and every listed process.
func (r *reaper) signalAll(ps []procRef, sig unix.Signal) {
	r.signalGroup(sig)
	for _, p := range ps {
		if err := p.signal(sig); err != nil {
			r.log.Warn("signal leftover process", zap.Int("pid", p.PID), zap.Stringer("signal", sig), zap.Error(err))
		}
	}
}

// waitGone polls until no leftover is alive or the deadline passes, and
// returns the survivors. Newly found processes are added to found. A process
// found earlier counts until its own /proc entry says it is gone or a
// zombie: one that is still exiting can already have lost its environment,
// so the marker scan misses it, while it is not a zombie yet.
func (r *reaper) waitGone(deadline time.Time, found map[int]procRef) []procRef {
	wait := reapPollMin
	for {
		left := r.survivors(found)
		if len(left) == 0 || !time.Now().Before(deadline) {
			return left
		}
		time.Sleep(min(wait, time.Until(deadline)))
		wait = min(2*wait, reapPollMax)
	}
}

// survivors rescans for leftovers, adds new ones to found, and returns them
// together with every earlier found process that is still alive, in pid
// order.
func (r *reaper) survivors(found map[int]procRef) []procRef {
	left := r.leftovers()
	seen := map[int]bool{}
	for _, p := range left {
		seen[p.PID] = true
		if _, ok := found[p.PID]; !ok {
			found[p.PID] = p
		}
	}
	for pid, p := range found {
		if !seen[pid] && p.alive() {
			left = append(left, p)
		}
	}
	slices.SortFunc(left, func(a, b procRef) int { return a.PID - b.PID })
	return left
}

func pids(ps []procRef) []int {
	out := make([]int, len(ps))
	for i, p := range ps {
		out[i] = p.PID
	}
	return out
}
