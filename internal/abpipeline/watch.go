package abpipeline

import (
	"context"
	"errors"
	"fmt"
	"time"

	"go.uber.org/zap"

	"github.com/archiveflow/archiveflow/internal/logging"
	"github.com/archiveflow/archiveflow/internal/rkeys"
)

// abortRepeat is how long after an abort signal a job still running is
// signalled again (the first one may have reached a workflow not yet
// started).
const abortRepeat = 30 * time.Second

// callTimeout bounds one call to Temporal, so one slow workflow never
// stalls the watching of the others.
const callTimeout = 30 * time.Second

// UpdateID is the set_settings update id for the bot's settings_age: every
// pipeline watching the job sends the same one, and Temporal applies it once.
func UpdateID(age int64) string { return fmt.Sprintf("archivebot-settings-%d", age) }

// watcher obeys the bot for every running job claimed from its queues: it
// wakes on the bot's publish on archivebot:job:IDENT and polls `working`
// every WatchInterval in case a message was missed (as ArchiveBot's
// settings listener re-reads every 30 s).
type watcher struct {
	p *Pipeline
	// applied is the settings_age each job's workflow is known to have.
	applied map[string]int64
	// abortSent is when each job was last sent the abort signal.
	abortSent map[string]time.Time
}

func newWatcher(p *Pipeline) *watcher {
	return &watcher{p: p, applied: map[string]int64{}, abortSent: map[string]time.Time{}}
}

func (w *watcher) run(ctx context.Context) {
	sub := w.p.store.SubscribeJobChannels(ctx)
	defer func() { _ = sub.Close() }()
	msgs := sub.Channel()
	t := time.NewTicker(w.p.opts.WatchInterval)
	defer t.Stop()
	w.poll(ctx)
	keys := w.p.store.Keys()
	for {
		select {
		case m, ok := <-msgs:
			if !ok {
				return
			}
			if ident, ok := keys.JobFromChannel(m.Channel); ok {
				w.check(ctx, ident)
			}
		case <-t.C:
			w.poll(ctx)
		case <-ctx.Done():
			return
		}
	}
}

// poll checks every running bot job whose settings_age moved or whose
// abort was requested, and forgets jobs no longer running.
func (w *watcher) poll(ctx context.Context) {
	jobs, err := w.p.store.WorkingBotJobs(ctx)
	if err != nil {
		if ctx.Err() == nil {
			w.p.log.Warn("watch running ArchiveBot jobs", zap.Error(err))
		}
		return
	}
	live := make(map[string]bool, len(jobs))
	for _, j := range jobs {
		live[j.Ident] = true
		age, known := w.applied[j.Ident]
		if j.AbortRequested || !known || age != j.SettingsAge {
			w.check(ctx, j.Ident)
		}
	}
	for id := range w.applied {
		if !live[id] {
			delete(w.applied, id)
		}
	}
	for id := range w.abortSent {
		if !live[id] {
			delete(w.abortSent, id)
		}
	}
}

// check obeys the bot for one job: an abort request becomes the
// workflow's abort signal; settings that differ from the workflow's become
// its set_settings update, under the bot's settings_age as update id.
func (w *watcher) check(ctx context.Context, ident string) {
	log := w.p.log.With(logging.Ident(ident))
	v, err := w.p.store.GetJob(ctx, ident)
	if errors.Is(err, rkeys.ErrJobNotFound) {
		delete(w.applied, ident)
		return
	}
	if err != nil {
		log.Warn("read job the bot changed", zap.Error(err))
		return
	}
	if v.Final() || v.Raw["claim_queue"] == "" || v.Raw["claim_token"] == "" {
		return // not a running job claimed from ArchiveBot's queues
	}
	if v.AbortRequested {
		if last, ok := w.abortSent[ident]; ok && w.p.now().Sub(last) < abortRepeat {
			return
		}
		cctx, cancel := context.WithTimeout(ctx, callTimeout)
		err := w.p.runner.Abort(cctx, ident, "requested by ArchiveBot")
		cancel()
		if err != nil {
			log.Warn("abort job on bot command (retrying)", zap.Error(err))
			return
		}
		if _, sent := w.abortSent[ident]; !sent {
			w.p.logJob(ctx, ident, "Job aborting on bot command.")
		}
		w.abortSent[ident] = w.p.now()
		log.Info("job aborted on bot command")
		return
	}
	if age, ok := w.applied[ident]; ok && age == v.SettingsAge {
		return
	}
	want := BotSettings(v)
	t0 := time.Now()
	cctx, cancel := context.WithTimeout(ctx, callTimeout)
	defer cancel()
	cur, err := w.p.runner.Settings(cctx, ident)
	if err != nil {
		log.Debug("read the workflow's settings (retrying)", zap.Error(err))
		return
	}
	if want.OlderThan(cur) {
		// Another pipeline applied a newer change of the bot's since this
		// read; the next check reads that one.
		log.Debug("the workflow has newer settings than this read of the bot's", zap.Int64("settings_age", v.SettingsAge),
			zap.Int64("workflow_settings_age", cur.BotAge))
		return
	}
	if !SameSettings(cur, want) {
		if err := w.p.runner.SetSettings(cctx, ident, UpdateID(v.SettingsAge), want); err != nil {
			log.Warn("apply the bot's settings (retrying)", zap.Error(err))
			return
		}
		log.Info("applied the bot's settings", zap.Duration("took", time.Since(t0)), zap.Int64("settings_age", v.SettingsAge),
			zap.Int("concurrency", want.Concurrency), zap.Int("delay_min", want.DelayMinMS),
			zap.Int("delay_max", want.DelayMaxMS), zap.Int("ignores", len(want.Ignores)))
	}
	w.applied[ident] = v.SettingsAge
}
