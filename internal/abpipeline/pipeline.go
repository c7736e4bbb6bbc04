package abpipeline

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"sync"
	"time"

	"go.temporal.io/sdk/client"
	"go.uber.org/zap"

	"github.com/archiveflow/archiveflow/config"
	"github.com/archiveflow/archiveflow/internal/logging"
	"github.com/archiveflow/archiveflow/internal/model"
	"github.com/archiveflow/archiveflow/internal/rkeys"
)

// Options configure one ArchiveBot pipeline (one pool of one process).
type Options struct {
	// Nickname selects the named queues (pending:NAME with NAME part of it).
	Nickname string
	AOOnly   bool
	Large    bool
	// PipelineID is the process's pipeline id (hex), recorded as the job's
	// pipeline_id at claim, as ArchiveBot's pipelines do.
	PipelineID string
	// TaskQueue is the pool's shared task queue.
	TaskQueue string
	// MaxJobs bounds the jobs this pipeline has started and not seen end.
	MaxJobs int
	// PollInterval is the wait after finding every queue empty; it also
	// paces the lease recovery.
	PollInterval time.Duration
	// ClaimLease is how long a claim may stay unconfirmed.
	ClaimLease time.Duration
	// WatchInterval paces the fallback poll of running jobs (the bot's
	// publish on archivebot:job:IDENT triggers a check at once).
	WatchInterval time.Duration
}

func (o Options) validate() error {
	switch {
	case o.PipelineID == "" || o.TaskQueue == "":
		return errors.New("archivebot pipeline: pipeline id and task queue must be set")
	case o.MaxJobs < 1:
		return fmt.Errorf("archivebot pipeline: max jobs %d: must be >= 1", o.MaxJobs)
	case o.PollInterval <= 0 || o.ClaimLease <= 0 || o.WatchInterval <= 0:
		return errors.New("archivebot pipeline: poll interval, claim lease and watch interval must be > 0")
	}
	return nil
}

// Pipeline claims ArchiveBot jobs for one pool and obeys the bot while
// they run.
type Pipeline struct {
	store  *rkeys.Store
	runner Runner
	opts   Options
	log    *zap.Logger
	now    func() time.Time

	slots chan struct{}
	wg    sync.WaitGroup
}

// New returns a Pipeline; log may be nil.
func New(store *rkeys.Store, runner Runner, opts Options, log *zap.Logger) (*Pipeline, error) {
	if store == nil || runner == nil {
		return nil, errors.New("archivebot pipeline: store and runner are required")
	}
	if err := opts.validate(); err != nil {
		return nil, err
	}
	if log == nil {
		log = zap.NewNop()
	}
	return &Pipeline{store: store, runner: runner, opts: opts, now: time.Now,
		log:   log.Named("archivebot").With(zap.String("nickname", opts.Nickname)),
		slots: make(chan struct{}, opts.MaxJobs)}, nil
}

// Run claims and starts jobs, recovers expired claims and watches running
// bot jobs until ctx ends; jobs keep running in their workflows.
func (p *Pipeline) Run(ctx context.Context) error {
	p.log.Info("serving ArchiveBot queues", zap.Bool("ao_only", p.opts.AOOnly), zap.Bool("large", p.opts.Large),
		zap.Int("max_jobs", p.opts.MaxJobs))
	p.wg.Add(2)
	go func() { defer p.wg.Done(); p.recoverLoop(ctx) }()
	go func() { defer p.wg.Done(); newWatcher(p).run(ctx) }()
	p.claimLoop(ctx)
	p.wg.Wait()
	return nil
}

// claimLoop takes a job whenever a slot is free.
func (p *Pipeline) claimLoop(ctx context.Context) {
	for {
		select {
		case p.slots <- struct{}{}:
		case <-ctx.Done():
			return
		}
		found, err := p.ClaimOnce(ctx)
		if err != nil && ctx.Err() == nil {
			p.log.Warn("claim an ArchiveBot job (retrying)", zap.Error(err))
		}
		if !found || err != nil {
			select {
			case <-time.After(p.opts.PollInterval):
			case <-ctx.Done():
				return
			}
		}
	}
}

// ClaimOnce claims one job and starts it; found reports whether a job was
// taken. The caller has reserved a slot: a started job holds it until its
// workflow ends, otherwise it is released before ClaimOnce returns.
func (p *Pipeline) ClaimOnce(ctx context.Context) (found bool, err error) {
	var run Run
	defer func() {
		if run == nil {
			<-p.slots
		}
	}()
	named, err := p.store.NamedQueues(ctx)
	if err != nil {
		return false, err
	}
	queues := CandidateQueues(named, p.opts.Nickname, p.opts.AOOnly, p.opts.Large)
	c, err := p.store.ClaimBotJob(ctx, rkeys.ClaimRequest{
		Queues: queues, PipelineID: p.opts.PipelineID, TaskQueue: p.opts.TaskQueue,
		Token: newToken(), Lease: p.opts.ClaimLease,
	})
	if err != nil {
		return false, err
	}
	for _, d := range c.Dropped {
		p.log.Warn("dropped a queue entry whose job is gone or already finished", logging.Ident(d))
	}
	if c.Ident == "" {
		return false, nil
	}
	p.log.Info("claimed ArchiveBot job", logging.Ident(c.Ident), zap.String("queue", c.Queue))
	run, err = p.start(ctx, c)
	if run == nil {
		return true, err
	}
	p.wg.Add(1)
	go func() {
		defer p.wg.Done()
		defer func() { <-p.slots }()
		// The slot is this process's share of the work: it is free again
		// when the workflow ends, or when this pipeline stops (the job
		// runs on in its workflow).
		_ = run.Get(ctx, nil)
	}()
	return true, err
}

// start starts the claimed job's workflow and confirms the claim. It
// returns a nil Run when the job needs no slot here (it ended at once, or
// its workflow already ran elsewhere).
func (p *Pipeline) start(ctx context.Context, c rkeys.Claim) (Run, error) {
	log := p.log.With(logging.Ident(c.Ident))
	v, err := p.store.GetJob(ctx, c.Ident)
	if err != nil {
		// Redis trouble: the lease brings the job back if this never heals.
		return nil, fmt.Errorf("read claimed job %s: %w", c.Ident, err)
	}
	job, notes, jerr := JobFromView(v)
	for _, n := range notes {
		p.logJob(ctx, c.Ident, n)
	}
	if v.AbortRequested {
		// Aborted while queued: end it aborted without running anything.
		p.logJob(ctx, c.Ident, "Job aborted before it started (abort requested while queued).")
		return nil, p.end(ctx, c, model.StateAborted)
	}
	var run Run
	if jerr == nil {
		run, jerr = p.runner.Start(ctx, job)
	}
	switch {
	case errors.Is(jerr, ErrAlreadyRunning):
		// A late start of an earlier claim of this job: it runs; adopt it.
		log.Info("job's workflow already runs; claim adopted")
		return nil, p.confirm(ctx, c)
	case errors.Is(jerr, ErrBadJob):
		log.Warn("ArchiveBot job refused", zap.Error(jerr))
		p.logJob(ctx, c.Ident, "archiveflow cannot run this job: "+jerr.Error())
		return nil, p.end(ctx, c, model.StateFailed)
	case jerr != nil:
		// Temporal unavailable: give the job back at once rather than wait
		// for the lease.
		if ok, err := p.store.RequeueClaim(ctx, c); err != nil || !ok {
			log.Warn("give back a job whose workflow did not start (its lease will)", zap.Error(err))
		}
		return nil, jerr
	}
	log.Info("started ArchiveBot job", zap.String("url", job.URL), zap.String("fetch_depth", job.FetchDepth))
	return run, p.confirm(ctx, c)
}

func (p *Pipeline) confirm(ctx context.Context, c rkeys.Claim) error {
	ok, err := p.store.ConfirmClaim(ctx, c.Ident, c.Token)
	if err != nil {
		return err
	}
	if !ok {
		p.log.Warn("claim was taken back before its workflow started; the workflow runs and the next claim adopts it",
			logging.Ident(c.Ident))
	}
	return nil
}

// end finishes a claimed job without a workflow, with ArchiveBot's
// finish keys (jobs_aborted/jobs_failed, finish_notifications, expiry).
func (p *Pipeline) end(ctx context.Context, c rkeys.Claim, state model.JobState) error {
	if err := p.store.Finish(ctx, c.Ident, state); err != nil && !errors.Is(err, rkeys.ErrJobFinal) {
		return err
	}
	_, err := p.store.ConfirmClaim(ctx, c.Ident, c.Token)
	return err
}

// logJob writes a stdout packet to the job's log (what the bot's !status
// and the dashboard show).
func (p *Pipeline) logJob(ctx context.Context, ident, msg string) {
	if _, err := p.store.AppendLog(ctx, ident, "", []rkeys.Packet{rkeys.Stdout(p.now(), msg)}); err != nil {
		p.log.Warn("write job log", logging.Ident(ident), zap.Error(err))
	}
}

// recoverLoop returns expired claims whose workflow never started.
func (p *Pipeline) recoverLoop(ctx context.Context) {
	t := time.NewTicker(p.opts.PollInterval)
	defer t.Stop()
	for {
		if _, err := p.RecoverOnce(ctx); err != nil && ctx.Err() == nil {
			p.log.Warn("recover expired ArchiveBot claims", zap.Error(err))
		}
		select {
		case <-t.C:
		case <-ctx.Done():
			return
		}
	}
}

// RecoverOnce handles the claims whose lease ended: a job whose workflow
// runs keeps it (the claim is confirmed), any other goes back to its
// queue. It returns how many jobs were requeued.
func (p *Pipeline) RecoverOnce(ctx context.Context) (int, error) {
	claims, err := p.store.ExpiredClaims(ctx, p.now(), 100)
	if err != nil {
		return 0, err
	}
	n := 0
	var errs []error
	for _, c := range claims {
		running, err := p.runner.Running(ctx, c.Ident)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if running {
			if _, err := p.store.ConfirmClaim(ctx, c.Ident, c.Token); err != nil {
				errs = append(errs, err)
			}
			continue
		}
		if c.Queue == "" || c.Token == "" {
			// The hash is gone (or the claim fields with it): only the
			// lease is left; RequeueClaim's checks remove it.
			c.Queue, c.Token = rkeys.QueuePending, "-"
		}
		ok, err := p.store.RequeueClaim(ctx, c)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if ok {
			n++
			p.log.Warn("claim expired with no workflow running: job put back into its queue",
				logging.Ident(c.Ident), zap.String("queue", c.Queue))
		}
	}
	return n, errors.Join(errs...)
}

func newToken() string {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// Nickname is the nickname a pool's pipeline matches named queues with:
// pools[].archivebot.nickname, else worker.nickname, else the host name.
func Nickname(cfg *config.Config, pool config.Pool) string {
	if pool.ArchiveBot != nil && pool.ArchiveBot.Nickname != "" {
		return pool.ArchiveBot.Nickname
	}
	if cfg.Worker.Nickname != "" {
		return cfg.Worker.Nickname
	}
	host, _ := os.Hostname()
	return host
}

// NamedTag is the tag of the jobs pool's pipeline claims from a named
// queue (pending:NAME, served because NAME is part of its nickname): its
// nickname, so only pipelines of that nickname run them, as only they
// claim from that queue in ArchiveBot. The pool's workers have it as a
// tag (pools.Tags). "" when the nickname cannot be a tag
// (config.ValidateTag): such jobs then run on any worker of the pool.
func NamedTag(cfg *config.Config, pool config.Pool) string {
	nick := Nickname(cfg, pool)
	if pool.ArchiveBot == nil || config.ValidateTag(nick) != nil {
		return ""
	}
	return nick
}

// ForPool returns the pipeline of one pool configured as an ArchiveBot
// pipeline (pool.ArchiveBot set), starting workflows through tc.
func ForPool(cfg *config.Config, pool config.Pool, store *rkeys.Store, tc client.Client, pipelineID string, log *zap.Logger) (*Pipeline, error) {
	if pool.ArchiveBot == nil {
		return nil, fmt.Errorf("pool %s: not an ArchiveBot pipeline (pools[].archivebot is not set)", pool.Name)
	}
	ab := cfg.ArchiveBot
	runner := &TemporalRunner{Config: cfg, Client: tc, Pool: pool}
	return New(store, runner, Options{
		Nickname: Nickname(cfg, pool), AOOnly: pool.ArchiveBot.AOOnly, Large: pool.ArchiveBot.Large,
		PipelineID: pipelineID, TaskQueue: pool.TaskQueue, MaxJobs: ab.MaxJobs,
		PollInterval: ab.PollInterval, ClaimLease: ab.ClaimLease, WatchInterval: ab.WatchInterval,
	}, log.With(zap.String("pool", pool.Name)))
}

// Serve runs the pipelines of every pool of pools configured as an
// ArchiveBot pipeline until ctx ends; with none it returns at once.
func Serve(ctx context.Context, cfg *config.Config, pools []config.Pool, store *rkeys.Store, tc client.Client, pipelineID string, log *zap.Logger) error {
	var ps []*Pipeline
	for _, pool := range pools {
		if pool.ArchiveBot == nil {
			continue
		}
		p, err := ForPool(cfg, pool, store, tc, pipelineID, log)
		if err != nil {
			return err
		}
		ps = append(ps, p)
	}
	var wg sync.WaitGroup
	for _, p := range ps {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_ = p.Run(ctx)
		}()
	}
	wg.Wait()
	return nil
}
