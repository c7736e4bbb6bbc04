// Package slotgate owns making a worker stop taking work: a worker's
// activity slots are reserved (and so a task polled) only while every
// Gate is open. The disk guard (internal/diskguard) and a pipeline's
// claim lock (internal/pipelinelock) are gates; a Switch is a gate set by
// its owner with the reason it is closed. Work a worker already holds
// runs on: a gate stops new polls only. A poller reserves its slot before
// it polls, so a claim (Claims) may still reach a worker just after its
// gate closed: Refuser hands it back, retryable, before it starts.
package slotgate

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/interceptor"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/worker"
	"go.uber.org/zap"
)

// Gate is open while Reason is "": Wait returns once it is open (at once
// when it is), or with ctx's error.
type Gate interface {
	Reason() string
	Wait(ctx context.Context) error
}

// Supplier wraps a worker's activity slot supplier: a slot is reserved
// only while every gate is open. One Supplier may serve several workers
// (a pool's shared queue and its tag queues): they then share inner's
// slots. A poller that reserved its slot before a gate closed may still
// take one task: Refuser hands a claim back.
func Supplier(inner worker.SlotSupplier, gates ...Gate) worker.SlotSupplier {
	if len(gates) == 0 {
		return inner
	}
	return &slots{gates: gates, inner: inner}
}

type slots struct {
	gates []Gate
	inner worker.SlotSupplier
}

// closed is the first closed gate's reason ("" when all are open).
func (s *slots) closed() Gate {
	for _, g := range s.gates {
		if g.Reason() != "" {
			return g
		}
	}
	return nil
}

func (s *slots) ReserveSlot(ctx context.Context, info worker.SlotReservationInfo) (*worker.SlotPermit, error) {
	for g := s.closed(); g != nil; g = s.closed() {
		if err := g.Wait(ctx); err != nil {
			return nil, err
		}
	}
	return s.inner.ReserveSlot(ctx, info)
}

func (s *slots) TryReserveSlot(info worker.SlotReservationInfo) *worker.SlotPermit {
	if s.closed() != nil {
		return nil
	}
	return s.inner.TryReserveSlot(info)
}

func (s *slots) MarkSlotUsed(info worker.SlotMarkUsedInfo) { s.inner.MarkSlotUsed(info) }
func (s *slots) ReleaseSlot(info worker.SlotReleaseInfo)   { s.inner.ReleaseSlot(info) }
func (s *slots) MaxSlots() int                             { return s.inner.MaxSlots() }

// Switch is a Gate its owner opens and closes (Set); the zero value is
// open.
type Switch struct {
	mu      sync.Mutex
	reason  string
	changed chan struct{} // closed and replaced on every change
}

// Set closes the switch with reason ("" opens it); it reports whether
// that changed whether the switch is open.
func (s *Switch) Set(reason string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	was := s.reason != ""
	s.reason = reason
	if was == (reason != "") {
		return false
	}
	if s.changed != nil {
		close(s.changed)
		s.changed = nil
	}
	return true
}

// Reason implements Gate.
func (s *Switch) Reason() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.reason
}

// Wait implements Gate.
func (s *Switch) Wait(ctx context.Context) error {
	for {
		s.mu.Lock()
		if s.reason == "" {
			s.mu.Unlock()
			return nil
		}
		if s.changed == nil {
			s.changed = make(chan struct{})
		}
		ch := s.changed
		s.mu.Unlock()
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-ch:
		}
	}
}

// Claims are the activity types by which a worker takes a job's work from
// a shared queue or its routed-page queue: a snapshot's host, a crawl's
// page, batch of pages or URL list. Other tasks (the workflows' Redis
// writes, the hooks of what the worker already claimed) are never refused.
var Claims = map[string]bool{"ClaimHost": true, "ClaimAndDiscover": true, "RunPage": true, "RunPageBatch": true, "SeedURLList": true}

// ErrTypeClosed is the error type of a claim Refuser hands back.
const ErrTypeClosed = "WorkerNotClaiming"

// ErrTypeLocked is the error type of a claim a locked pipeline hands back
// (internal/pipelinelock, through RefuseClaims).
const ErrTypeLocked = "PipelineLocked"

// Refused reports an activity's error that says a worker's gates handed
// its claim back before it started (ErrTypeClosed, ErrTypeLocked): its
// last attempt ran none of its work.
func Refused(err error) bool {
	var appErr *temporal.ApplicationError
	return errors.As(err, &appErr) && (appErr.Type() == ErrTypeClosed || appErr.Type() == ErrTypeLocked)
}

// Refuser refuses every claim (Claims) that starts while gate is closed —
// one a poller had already reserved its slot for when the gate closed: it
// fails retryable at once, before any of its work starts, and goes back
// to the queue for another worker (it costs the claim one attempt; at most
// one per poller and closing). The disk guard's holds (a host-wide
// maintenance, a low disk) use it; the claim lock refuses only other
// jobs' claims (internal/pipelinelock, through RefuseClaims).
func Refuser(gate Gate, log *zap.Logger) interceptor.WorkerInterceptor {
	if log == nil {
		log = zap.NewNop()
	}
	return RefuseClaims(func(info activity.Info) error {
		reason := gate.Reason()
		if reason == "" {
			return nil
		}
		log.Info("claim refused: this worker claims no work now", zap.String("reason", reason),
			zap.String("activity", info.ActivityType.Name), zap.String("workflow_id", info.WorkflowExecution.ID))
		return temporal.NewApplicationError(fmt.Sprintf("worker not claiming work (%s): claim of %s left to another worker", reason, info.WorkflowExecution.ID), ErrTypeClosed)
	})
}

// RefuseClaims is a worker interceptor that asks refuse about every claim
// (Claims) before it starts: a non-nil error (a retryable application
// error, so the claim goes back to the queue) is the claim's outcome, and
// nothing of it runs. Other activities are not asked.
func RefuseClaims(refuse func(activity.Info) error) interceptor.WorkerInterceptor {
	return &refuser{refuse: refuse}
}

type refuser struct {
	interceptor.WorkerInterceptorBase
	refuse func(activity.Info) error
}

func (r *refuser) InterceptActivity(ctx context.Context, next interceptor.ActivityInboundInterceptor) interceptor.ActivityInboundInterceptor {
	a := &refuseClaims{refuse: r.refuse}
	a.Next = next
	return a
}

type refuseClaims struct {
	interceptor.ActivityInboundInterceptorBase
	refuse func(activity.Info) error
}

func (a *refuseClaims) ExecuteActivity(ctx context.Context, in *interceptor.ExecuteActivityInput) (any, error) {
	if info := activity.GetInfo(ctx); Claims[info.ActivityType.Name] {
		if err := a.refuse(info); err != nil {
			return nil, err
		}
	}
	return a.Next.ExecuteActivity(ctx, in)
}
