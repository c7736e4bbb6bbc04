package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/spf13/pflag"

	"github.com/archiveflow/archiveflow/internal/backend"
	"github.com/archiveflow/archiveflow/internal/rkeys"
)

func logsCommand() *command {
	return &command{
		name:    "logs",
		args:    "IDENT",
		summary: "print a job's log from Redis (-f follows it live), or one hook's files (--hook)",
		details: `
Prints IDENT_log oldest first: hook stderr lines, downloads and ignored
URLs. With -f it keeps following as the job writes (it subscribes to the
"updates" channel, as ArchiveBot's dashboard does) and exits when the job
reaches a final state. --json prints each entry as ArchiveBot's packet.

--hook NAME prints one hook's own files instead: the stdout and stderr
of each of its attempts, which the runner keeps in the snapshot
directory (ARCHIVE_DIR/snapshots/IDENT/PLUGIN/HOOK.ATTEMPT.stdout.log and
.stderr.log) on the worker host that ran the job. NAME is a plugin name
(all its hooks), a hook file name or its stem.`,
		examples: []string{
			"starter logs 3mlbkdu1fpo7wt4lr2qf1mpsw",
			"starter logs -f 3mlbkdu1fpo7wt4lr2qf1mpsw",
			"starter logs -f https://example.com/ --json | jq .",
			"starter logs 3mlbkdu1fpo7wt4lr2qf1mpsw --hook wget",
		},
		flags: func(fs *pflag.FlagSet) {
			fs.String("hook", "", "print this hook's stdout and stderr files instead (a plugin name, a hook file name or its stem)")
			fs.BoolP("follow", "f", false, "follow the log until the job ends")
			fs.Int64("after", 0, "only entries with a score greater than this")
		},
		run: runLogs,
	}
}

// logPage is how many entries are read per round trip.
const logPage = 1000

func runLogs(ctx context.Context, a *app, inv *invocation) error {
	id, err := oneIdent(inv)
	if err != nil {
		return err
	}
	follow, _ := inv.fs.GetBool("follow")
	after, _ := inv.fs.GetInt64("after")
	if hook, _ := inv.fs.GetString("hook"); inv.fs.Changed("hook") {
		if hook == "" || follow || inv.fs.Changed("after") {
			return usageErr("--hook %q: give a plugin or hook name, without -f or --after (it prints the hook's files)", hook)
		}
		return runHookLogs(ctx, a, inv, id, hook)
	}
	if after < 0 {
		return usageErr("--after %d: must be >= 0", after)
	}
	b, err := a.connectRedis(ctx, inv)
	if err != nil {
		return err
	}
	defer b.Close()
	v, err := getJob(ctx, b, id)
	if err != nil {
		return a.notInRedis(ctx, inv, id, err, "its log went with it (a hook's files stay: starter logs "+id+" --hook HOOK on its host)")
	}
	if !follow || v.Final() {
		_, err := a.printLog(ctx, inv, b, id, after)
		return err
	}
	return a.followLog(ctx, inv, b, id, after)
}

// printLog prints every entry after `after` and returns the last score.
func (a *app) printLog(ctx context.Context, inv *invocation, b *backend.Backend, id string, after int64) (int64, error) {
	for {
		entries, err := b.Store.ReadLog(ctx, id, after, logPage)
		if err != nil && len(entries) == 0 {
			return after, withCode(exitUnavailable, err)
		}
		if err != nil {
			inv.log.Warn(err.Error())
		}
		for _, e := range entries {
			if err := a.printEntry(inv, e); err != nil {
				return after, err
			}
			after = e.Score
		}
		if len(entries) < logPage {
			return after, nil
		}
	}
}

// followLog streams new entries until the job is final (then drains what
// is left) or ctx ends.
func (a *app) followLog(ctx context.Context, inv *invocation, b *backend.Backend, id string, after int64) error {
	sub, err := b.Store.Subscribe(ctx, id, after)
	if err != nil {
		return withCode(exitUnavailable, err)
	}
	defer sub.Close()
	tick := time.NewTicker(a.pollInterval)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil // Ctrl-C: stop following
		case e, ok := <-sub.C:
			if !ok {
				if err := sub.Err(); err != nil {
					return withCode(exitUnavailable, err)
				}
				return nil // the job's keys are gone
			}
			if err := a.printEntry(inv, e); err != nil {
				return err
			}
			after = e.Score
		case <-tick.C:
			v, err := b.Store.GetJob(ctx, id)
			if errors.Is(err, rkeys.ErrJobNotFound) {
				return nil // expired right after finishing
			}
			if err != nil || !v.Final() {
				continue
			}
			sub.Close()
			for e := range sub.C { // entries already delivered but not printed
				if e.Score > after {
					if err := a.printEntry(inv, e); err != nil {
						return err
					}
					after = e.Score
				}
			}
			_, err = a.printLog(ctx, inv, b, id, after)
			return err
		}
	}
}

// printEntry prints one log entry: the raw packet with --json, else a
// human line.
func (a *app) printEntry(inv *invocation, e rkeys.LogEntry) error {
	if inv.json {
		if json.Valid([]byte(e.Raw)) {
			_, err := fmt.Fprintln(a.stdout, e.Raw)
			return err
		}
		return writeJSON(a.stdout, map[string]any{"score": e.Score, "raw": e.Raw})
	}
	p := e.Packet
	ts := p.TS.Local().Format("15:04:05")
	var err error
	switch p.Type {
	case rkeys.PacketStdout:
		_, err = fmt.Fprintf(a.stdout, "%s %s\n", ts, p.Message)
	case rkeys.PacketDownload:
		flag := ""
		if p.IsError {
			flag = " ERROR"
		} else if p.IsWarning {
			flag = " warning"
		}
		_, err = fmt.Fprintf(a.stdout, "%s %d %s %s%s\n", ts, p.ResponseCode, p.WgetCode, p.URL, flag)
	case rkeys.PacketIgnore:
		_, err = fmt.Fprintf(a.stdout, "%s ignored %s (pattern %s)\n", ts, p.URL, p.Pattern)
	default:
		_, err = fmt.Fprintf(a.stdout, "%d %s\n", e.Score, e.Raw)
	}
	return err
}
