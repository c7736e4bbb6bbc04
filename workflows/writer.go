package workflows

import "go.temporal.io/sdk/workflow"

// writer runs the workflow's Redis writes one at a time, in the order the
// workflow produced them, so an older absolute counter value can never
// overwrite a newer one and a step's state lands after the results before
// it. Writes never block hook launches; the workflow waits for the queue to
// drain before it completes.
type writer struct {
	ops    []writeOp
	queued int
	done   int
}

type writeOp struct {
	name string
	run  func(ctx workflow.Context) error
}

// enqueue adds a write and returns its sequence number (1-based).
func (w *writer) enqueue(name string, run func(ctx workflow.Context) error) int {
	w.queued++
	w.ops = append(w.ops, writeOp{name: name, run: run})
	return w.queued
}

// run is the writer's coroutine; it never returns before the workflow ends.
func (w *writer) run(ctx workflow.Context) {
	for {
		if err := workflow.Await(ctx, func() bool { return len(w.ops) > 0 }); err != nil {
			return
		}
		op := w.ops[0]
		w.ops = w.ops[1:]
		if err := op.run(ctx); err != nil {
			// Only non-retryable errors get here (Redis writes retry
			// without limit): a bug, logged, never a reason to fail a job.
			workflow.GetLogger(ctx).Error("redis write failed", "write", op.name, "error", err)
		}
		w.done++
	}
}

// idle reports that every enqueued write is done.
func (w *writer) idle() bool { return w.done == w.queued }

// await blocks until write seq is done.
func (w *writer) await(ctx workflow.Context, seq int) error {
	return workflow.Await(ctx, func() bool { return w.done >= seq })
}
