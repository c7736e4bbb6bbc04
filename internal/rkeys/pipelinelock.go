package rkeys

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// PipelineLock is mnbot's claim lock: the pipeline (worker process) takes
// no work but this job's until the lock is cleared (UnlockPipeline), or,
// with UntilFinished, until the job has ended.
type PipelineLock struct {
	Ident         string
	UntilFinished bool
	By            string
	At            time.Time
}

// LockPipeline pins pipeline id to the job l.Ident (the pipeline_lock:ID
// hash; a lock it had is replaced). The job must exist and not have
// ended: ErrJobNotFound, ErrJobFinal.
func (s *Store) LockPipeline(ctx context.Context, id string, l PipelineLock) error {
	if id == "" || l.Ident == "" {
		return fmt.Errorf("lock pipeline %q to job %q: %w: pipeline and job must be named", id, l.Ident, ErrInvalid)
	}
	until := "0"
	if l.UntilFinished {
		until = "1"
	}
	keys := map[string]string{"job": s.keys.Job(l.Ident), "lock": s.keys.PipelineLock(id)}
	code, err := s.run(ctx, lockPipelineScript, keys, l.Ident, until, l.By, unixFloat(s.now())).Int()
	if err != nil {
		return fmt.Errorf("lock pipeline %s to job %s: %w", id, l.Ident, err)
	}
	return codeErr(code, "lock pipeline %s to job %s", id, l.Ident)
}

// lockPipelineScript writes a pipeline's lock on a job that has not ended.
// ARGV: ident until_finished by at
var lockPipelineScript = newScript([]string{"job", "lock"}, withStates, `
if redis.call('EXISTS', job) == 0 then return CODE_NOT_FOUND end
if is_final(redis.call('HGET', job, 'state')) then return CODE_FINAL end
redis.call('DEL', lock)
redis.call('HSET', lock, 'ident', ARGV[1], 'until_finished', ARGV[2], 'by', ARGV[3], 'at', ARGV[4])
return CODE_APPLIED
`)

// PipelineLockOf is pipeline id's lock; ok is false when it has none.
func (s *Store) PipelineLockOf(ctx context.Context, id string) (l PipelineLock, ok bool, err error) {
	f, err := s.rdb.HGetAll(ctx, s.keys.PipelineLock(id)).Result()
	if err != nil {
		return l, false, fmt.Errorf("read the lock of pipeline %s: %w", id, err)
	}
	if f["ident"] == "" {
		return l, false, nil
	}
	l = PipelineLock{Ident: f["ident"], UntilFinished: f["until_finished"] == "1", By: f["by"]}
	if at, err := strconv.ParseFloat(f["at"], 64); err == nil {
		l.At = time.Unix(0, int64(at*float64(time.Second)))
	}
	return l, true, nil
}

// UnlockPipeline clears pipeline id's lock: any lock when ident is "",
// else only a lock on that job (so a lock set again on another job in
// between stays). It reports whether a lock was cleared.
func (s *Store) UnlockPipeline(ctx context.Context, id, ident string) (bool, error) {
	n, err := s.run(ctx, unlockPipelineScript, map[string]string{"lock": s.keys.PipelineLock(id)}, ident).Int()
	if err != nil {
		return false, fmt.Errorf("unlock pipeline %s: %w", id, err)
	}
	return n == 1, nil
}

// unlockPipelineScript deletes a lock, when ARGV[1] is set only a lock on
// that job.
var unlockPipelineScript = newScript([]string{"lock"}, false, `
if ARGV[1] ~= '' and redis.call('HGET', lock, 'ident') ~= ARGV[1] then return 0 end
return redis.call('DEL', lock)
`)

// PageQueueSuffix ends the name of a pipeline's routed-page queue
// (QUEUE@INSTANCE/pages, internal/pools PageQueue), which it lists in its
// record's task_queues: the queue of a locked crawl's pages, held by the
// pipeline's disk guard as its shared queues are.
const PageQueueSuffix = "/pages"

// LockedHostQueues are the queues of shared queue queue's pool on the
// live pipelines locked to job ident, one per pipeline, in pipeline order:
// where a locked crawl's pages go (its pipelines take no work from the
// shared queue). Each is the pipeline's routed-page queue
// (QUEUE@INSTANCE/pages), or its host queue (QUEUE@INSTANCE) when its
// record lists none (a worker from before the routed-page queue). None
// when no live pipeline is locked to it.
func (s *Store) LockedHostQueues(ctx context.Context, ident, queue string) ([]string, error) {
	ps, err := s.ListPipelines(ctx)
	if err != nil {
		return nil, err
	}
	var out []string
	for _, p := range ps {
		l, ok, err := s.PipelineLockOf(ctx, p.ID)
		if err != nil {
			return nil, err
		}
		if !ok || l.Ident != ident {
			continue
		}
		var queues []string
		if err := json.Unmarshal([]byte(p.Fields["task_queues"]), &queues); err != nil {
			return nil, fmt.Errorf("pipeline %s task_queues %q: %w: %w", p.ID, p.Fields["task_queues"], errMalformed, err)
		}
		found := ""
		for _, q := range queues {
			if strings.HasPrefix(q, queue+"@") && (found == "" || strings.HasSuffix(q, PageQueueSuffix)) {
				found = q
			}
		}
		if found != "" {
			out = append(out, found)
		}
	}
	return out, nil
}
