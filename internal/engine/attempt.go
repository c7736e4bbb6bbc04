package engine

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"time"

	"github.com/archiveflow/archiveflow/activities"
	"github.com/archiveflow/archiveflow/internal/builtin"
	"github.com/archiveflow/archiveflow/internal/egress"
	"github.com/archiveflow/archiveflow/internal/fleethealth"
	"github.com/archiveflow/archiveflow/internal/jsonl"
	"github.com/archiveflow/archiveflow/internal/metrics"
	"github.com/archiveflow/archiveflow/internal/model"
	"github.com/archiveflow/archiveflow/internal/procs"
)

// attemptIO are the live callbacks of one attempt; either may be nil.
// Both get text with archiveflow's secrets redacted.
type attemptIO struct {
	// onRecord gets each valid JSONL record the hook prints.
	onRecord func(jsonl.Record)
	// onStderr gets each stderr line, and each fetch the policy refused
	// (egress.Denial.LogLine).
	onStderr func(string)
	// onReady is called at the hook's first line of stdout (a background
	// hook is ready: steprun).
	onReady func()
}

// attempt runs one attempt of a hook, wherever it is from (a snapshot's
// hook, a host-steps segment's, a crawl page's, a crawl setup hook): the
// one place a hook starts. It decides in-process or process (in-process
// only for a built-in that starts no process, where allowed
// (invocation.inProcessOK and Config.InProcessBuiltins), and only when the
// hook has no resource limits, which hold a process, not the worker), runs
// a process behind the attempt's fetch proxy when the fetch policy denies
// anything, builds its environment, limits and timeouts (spec), maps the
// exit to an outcome (procs), and redacts archiveflow's secrets from every
// text of the result. An error wrapping activities.ErrConfig is a
// configuration error a retry cannot fix.
//
// Every attempt is counted here (internal/metrics: hooks started, finished
// by status, duration).
func (e *Engine) attempt(ctx context.Context, inv invocation, io attemptIO) (res procs.Result, err error) {
	if res, ok := e.inMaintenance(ctx, inv); ok {
		return res, nil
	}
	start := time.Now()
	metrics.HookStarted(inv.hook.Plugin)
	defer func() { metrics.HookFinished(inv.hook.Plugin, attemptStatus(res, err), time.Since(start)) }()
	key := inv.hook.Key()
	name, inProc := "", false
	if inv.inProcessOK {
		name, inProc = e.inProcess(inv.hook.Path)
	}
	var spec procs.Spec
	if inProc {
		// A built-in run in this process holds the policy itself (its
		// fetchers dial through egress.Transport): no proxy.
		if spec, err = e.spec(inv, io.onRecord, io.onStderr, nil); err != nil {
			return procs.Result{}, err
		}
		inProc = !spec.Limits.Set()
	}
	if !inProc {
		fp, err := e.startFetchProxy(ctx, inv, io.onStderr)
		if err != nil {
			return procs.Result{}, fmt.Errorf("run hook %s: %w", key, err)
		}
		if fp != nil {
			defer fp.Close()
		}
		if spec, err = e.spec(inv, io.onRecord, io.onStderr, fp); err != nil {
			return procs.Result{}, err
		}
	}
	spec.OnReady = io.onReady
	if inProc {
		// A crawl page's built-in keeps no runner files: its records are
		// in the page's index and the frontier (docs/crawls.md).
		spec.NoRunnerFiles = true
		// The built-in decides its fetches with this worker's policy
		// object (its resolver included), as the proxy does for a process.
		res, err = procs.RunFunc(egress.WithPolicy(ctx, e.cfg.Fetch), spec, inProcessFunc(name, spec))
	} else {
		if inv.inProcessOK {
			// A crawl page's hook run as a process may read the files the
			// page's built-ins kept in memory so far.
			if err := builtin.WriteCrawlPageFiles(ctx); err != nil {
				return procs.Result{}, fmt.Errorf("run hook %s: write the page's earlier outputs: %w", key, err)
			}
		}
		res, err = procs.Run(ctx, spec)
	}
	if err != nil {
		if procs.IsPermanent(err) {
			return res, fmt.Errorf("run hook %s: %w: %w", key, err, activities.ErrConfig)
		}
		return res, fmt.Errorf("run hook %s: %w", key, err)
	}
	return e.redactResult(res), nil
}

// inMaintenance is the skipped result of an attempt whose plugin is in
// maintenance on this host (Config.Maintenance), naming the maintenance.
func (e *Engine) inMaintenance(ctx context.Context, inv invocation) (procs.Result, bool) {
	if e.cfg.Maintenance == nil {
		return procs.Result{}, false
	}
	why := e.cfg.Maintenance(ctx, inv.hook.Plugin)
	if why == "" {
		return procs.Result{}, false
	}
	now := time.Now()
	return procs.Result{Status: model.StatusSkipped, Reason: why, StartedAt: now, EndedAt: now,
		Last: &jsonl.ArchiveResult{Status: model.StatusSkipped, OutputStr: fleethealth.MaintenancePrefix + why}}, true
}

// attemptStatus is an attempt's status for the metrics: its final status,
// metrics.HookTransient when it is to be retried, metrics.HookError when it
// could not run.
func attemptStatus(res procs.Result, err error) string {
	switch {
	case err != nil || (res.Status == "" && !res.Transient):
		return metrics.HookError
	case res.Transient:
		return metrics.HookTransient
	default:
		return string(res.Status)
	}
}

// redactResult removes archiveflow's secrets from every text of a result
// a hook produced: it goes into workflow history, Redis and logs.
func (e *Engine) redactResult(res procs.Result) procs.Result {
	s := e.cfg.Secrets
	res.Reason = s.Redact(res.Reason)
	res.LimitError = s.Redact(res.LimitError)
	res.StderrTail = slices.Clone(res.StderrTail)
	for i, l := range res.StderrTail {
		res.StderrTail[i] = s.Redact(l)
	}
	if res.Last != nil {
		last := *res.Last
		last.OutputStr = s.Redact(last.OutputStr)
		last.Error = s.Redact(last.Error)
		if raw := string(last.OutputJSON); raw != "" {
			if red := s.Redact(raw); red != raw {
				last.OutputJSON = json.RawMessage(red)
			}
		}
		res.Last = &last
	}
	return res
}
