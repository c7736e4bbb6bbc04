// Package steprun owns the order in which the hooks of one plan run on a
// host, and the one rule that classifies how a hook attempt ended.
//
// Run walks the plan's steps in order. It launches a step's hooks in plan
// (filename) order: a foreground hook takes a slot of the step (the
// policy's Limit, read again while it waits, 0 pauses) and the step ends
// when its foreground hooks have ended; a background hook takes no slot and
// lives as the policy says (until Run returns, or on a context of its own
// such as a crawl's, until the crawl's teardown). As abx-dl does, no hook
// is launched after a background hook before that one is ready (it
// printed its first line of stdout), ended, or its ReadyWait ran out: a
// browser's session files exist before the hooks that use them start. When a step had a hook
// whose attempt must be retried, or a configuration error, it is the last
// step: later steps do not start.
//
// Every path that runs hooks on a host uses it: a host-steps segment
// (activities.RunSteps), a crawl page (engine.RunPage) and a crawl's setup
// hooks (engine's ensureSetup). Each path's attempt function starts its
// hook through the engine's one attempt function and returns Classify's
// verdict on it; a snapshot hook run as its own activity (RunHook) is
// classified by the same rule.
package steprun

import (
	"context"
	"slices"
	"sync"
	"time"
)

// Hook is one hook of a plan as the runner sees it.
type Hook struct {
	Step       int
	Background bool
}

// Class is how an attempt ended, as far as the plan's order cares; a
// greater Class weighs more when a step's hooks end differently.
type Class int

const (
	// Final: the hook has its final result (succeeded, noresults,
	// skipped, failed by its own report).
	Final Class = iota
	// Cancelled: the attempt was stopped by cancellation (abort, seal).
	Cancelled
	// Retry: the attempt ended without a final result and the hook is to
	// be tried again (in this run or a later one): its step is the last.
	Retry
	// Config: a configuration error no retry fixes: its step is the last.
	Config
)

func (c Class) String() string {
	switch c {
	case Final:
		return "final"
	case Retry:
		return "retry"
	case Cancelled:
		return "cancelled"
	case Config:
		return "config"
	}
	return "unknown"
}

// Ending is what is known about an attempt's end.
type Ending struct {
	// Err is the error of an attempt that could not run its hook.
	Err error
	// ConfigErr says Err is a configuration error (activities.ErrConfig).
	ConfigErr bool
	// Transient: the hook ran and ended without a final result (a crash,
	// a timeout, an exit without a record, an invalid record).
	Transient bool
	// Cancelled: the attempt's context was cancelled.
	Cancelled bool
	// WorkerStopping: this worker process is shutting down.
	WorkerStopping bool
	// Background: a background hook, whose stop by cancellation (the seal,
	// the page's or the crawl's end) is its normal end.
	Background bool
}

// Classify is the one rule for how an attempt ended: a configuration error
// is Config; a stop because the worker shuts down is Retry (the job goes
// on elsewhere); a final result is Final, even when cancellation came as
// the hook ended; a background hook's stop by cancellation is Final (it was
// told to stop); any other cancellation is Cancelled; an attempt that could
// not run or ended without a final result is Retry.
func Classify(e Ending) Class {
	switch {
	case e.ConfigErr:
		return Config
	case e.Cancelled && e.WorkerStopping:
		return Retry
	case e.Err == nil && !e.Transient:
		return Final
	case e.Cancelled && e.Background:
		return Final
	case e.Cancelled:
		return Cancelled
	}
	return Retry
}

// Policy is how Run schedules a plan.
type Policy struct {
	// Steps are the steps to walk, in order, empty ones included (each is
	// announced to OnStep); nil: the steps the hooks have.
	Steps []int
	// Limit is how many foreground hooks of step may run at once; it is
	// asked before each launch and every Poll while Run waits (0 pauses).
	// nil: one at a time.
	Limit func(step int) int
	// Poll is how often Run asks Limit again and calls Idle while it
	// waits (default 1s).
	Poll time.Duration
	// OnStep is called as each step starts.
	OnStep func(step int)
	// Idle is called every Poll while no hook of the step runs (paused).
	Idle func()
	// KeepGoing: a step with a Retry or Config outcome is not the last
	// (a crawl's setup hooks: the crawl goes on and the hooks that need
	// one fail on their own).
	KeepGoing bool
	// ReadyWait is how long the launch of the hooks after background hook
	// i waits for it to be ready (nil or 0: not at all); NotReady, if set,
	// hears of a wait that ran out.
	ReadyWait func(i int) time.Duration
	NotReady  func(i int)
	// Background is the context background hooks run on when they must
	// outlive Run (a crawl's setup daemons, until its teardown), with
	// BackgroundDone tracking them; nil: background hooks are stopped
	// when Run returns, and Run waits for them.
	Background     context.Context
	BackgroundDone *sync.WaitGroup
}

// AttemptFunc runs hook i of the plan once and classifies its end; a
// background hook's attempt calls ready once the hook is ready (its first
// line of stdout: procs.Spec.OnReady). ready may be called more than once.
type AttemptFunc func(ctx context.Context, i int, ready func()) Class

// Run runs hooks (in plan order) by attempt under policy p and returns the
// class that ended the run early (Retry, Config or Cancelled), or Final
// when every step ran. Hooks of steps after the last are not started.
func Run(ctx context.Context, hooks []Hook, p Policy, attempt AttemptFunc) Class {
	r := &run{ctx: ctx, hooks: hooks, p: p, attempt: attempt}
	if p.Background == nil {
		bgCtx, stop := context.WithCancel(ctx)
		r.bgCtx, r.bg = bgCtx, &sync.WaitGroup{}
		defer func() {
			stop()
			r.bg.Wait()
		}()
	} else {
		r.bgCtx, r.bg = p.Background, p.BackgroundDone
		if r.bg == nil {
			r.bg = &sync.WaitGroup{}
		}
	}
	steps := p.Steps
	if steps == nil {
		for _, h := range hooks {
			if !slices.Contains(steps, h.Step) {
				steps = append(steps, h.Step)
			}
		}
	}
	for _, step := range steps {
		if ctx.Err() != nil {
			return Cancelled
		}
		if p.OnStep != nil {
			p.OnStep(step)
		}
		if end := r.step(step); end != Final && !p.KeepGoing {
			return end
		}
	}
	if ctx.Err() != nil {
		return Cancelled
	}
	return Final
}

type run struct {
	ctx     context.Context
	hooks   []Hook
	p       Policy
	attempt AttemptFunc
	bgCtx   context.Context
	bg      *sync.WaitGroup

	mu  sync.Mutex
	end Class // the step's worst end so far
}

// note keeps the step's end that stops the run: Config over Retry over
// Cancelled over Final.
func (r *run) note(c Class) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if c > r.end {
		r.end = c
	}
}

func (r *run) limit(step int) int {
	if r.p.Limit == nil {
		return 1
	}
	return r.p.Limit(step)
}

// step launches the hooks of step in plan order and waits for its
// foreground ones.
func (r *run) step(step int) Class {
	r.end = Final
	poll := r.p.Poll
	if poll <= 0 {
		poll = time.Second
	}
	tick := time.NewTicker(poll)
	defer tick.Stop()
	ended := make(chan struct{}, len(r.hooks))
	active := 0
	for i, h := range r.hooks {
		if h.Step != step {
			continue
		}
		if h.Background {
			r.background(i)
			continue
		}
		for active >= r.limit(step) && r.ctx.Err() == nil {
			select {
			case <-ended:
				active--
			case <-tick.C:
				if active == 0 && r.p.Idle != nil {
					r.p.Idle()
				}
			case <-r.ctx.Done():
			}
		}
		if r.ctx.Err() != nil {
			break
		}
		active++
		go func() {
			defer func() { ended <- struct{}{} }()
			r.note(r.attempt(r.ctx, i, func() {}))
		}()
	}
	for ; active > 0; active-- {
		<-ended
	}
	if r.ctx.Err() != nil && r.end == Final {
		return Cancelled
	}
	return r.end
}

// background launches background hook i and waits until it is ready, has
// ended, or its ReadyWait ran out.
func (r *run) background(i int) {
	readyCh, ended := make(chan struct{}), make(chan struct{})
	var once sync.Once
	r.bg.Add(1)
	go func() {
		defer r.bg.Done()
		defer close(ended)
		r.attempt(r.bgCtx, i, func() { once.Do(func() { close(readyCh) }) })
	}()
	var wait time.Duration
	if r.p.ReadyWait != nil {
		wait = r.p.ReadyWait(i)
	}
	if wait <= 0 {
		return
	}
	t := time.NewTimer(wait)
	defer t.Stop()
	select {
	case <-readyCh:
	case <-ended:
	case <-r.ctx.Done():
	case <-t.C:
		if r.p.NotReady != nil {
			r.p.NotReady(i)
		}
	}
}
