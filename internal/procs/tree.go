package procs

import (
	"bytes"
	"strconv"

	"golang.org/x/sys/unix"
)

// Proc is one process of a tree (Tree) as /proc showed it.
type Proc struct {
	PID       int
	StartTime uint64 // clock ticks since boot: a reused pid is another process
	Zombie    bool   // ended, not yet reaped by its parent
	// Data is the data segment (data + stack: what RLIMIT_DATA bounds) and
	// RSS the resident set, in bytes; 0 for a zombie.
	Data, RSS int64
}

// Tree lists root and every process below it (by parent), root first, for
// a hook that watches a program it started. A process that is gone
// between the listing and its reading is left out.
func Tree(root int) []Proc {
	pids, err := listPIDs()
	if err != nil {
		return nil
	}
	type entry struct {
		ppid int
		p    Proc
	}
	all := make(map[int]entry, len(pids))
	children := map[int][]int{}
	for _, pid := range pids {
		st, err := readStat(pid)
		if err != nil {
			continue
		}
		all[pid] = entry{ppid: st.PPID, p: Proc{PID: pid, StartTime: st.StartTime, Zombie: st.State == 'Z' || st.State == 'X'}}
		children[st.PPID] = append(children[st.PPID], pid)
	}
	var out []Proc
	for queue := []int{root}; len(queue) > 0; queue = queue[1:] {
		e, ok := all[queue[0]]
		if !ok {
			continue
		}
		if !e.p.Zombie {
			e.p.Data, e.p.RSS = memoryOf(e.p.PID)
		}
		out = append(out, e.p)
		queue = append(queue, children[queue[0]]...)
	}
	return out
}

var pageSize = int64(unix.Getpagesize())

// memoryOf reads a process's data segment and RSS in bytes from
// /proc/PID/statm (size resident shared text lib data dt, in pages);
// zeros when unreadable.
func memoryOf(pid int) (data, rss int64) {
	var buf [256]byte
	b, err := readSmall(procRoot+"/"+strconv.Itoa(pid)+"/statm", buf[:])
	if err != nil {
		return 0, 0
	}
	f := bytes.Fields(b)
	if len(f) < 6 {
		return 0, 0
	}
	r, err1 := strconv.ParseInt(string(f[1]), 10, 64)
	d, err2 := strconv.ParseInt(string(f[5]), 10, 64)
	if err1 != nil || err2 != nil {
		return 0, 0
	}
	return d * pageSize, r * pageSize
}

// Running reports whether p is still that process and not a zombie.
func (p Proc) Running() bool { return procRef{PID: p.PID, StartTime: p.StartTime}.alive() }

// Kill sends SIGKILL to p, through a pidfd after checking its start time,
// so a reused pid is never signalled; a process gone already is not an
// error.
func (p Proc) Kill() error {
	return procRef{PID: p.PID, StartTime: p.StartTime}.signal(unix.SIGKILL)
}
