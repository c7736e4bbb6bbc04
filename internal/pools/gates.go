package pools

import (
	"fmt"
	"slices"

	"go.temporal.io/sdk/interceptor"
	"go.temporal.io/sdk/worker"
	"go.uber.org/zap"

	"github.com/archiveflow/archiveflow/config"
	"github.com/archiveflow/archiveflow/internal/diskguard"
	"github.com/archiveflow/archiveflow/internal/pipelinelock"
	"github.com/archiveflow/archiveflow/internal/rkeys"
	"github.com/archiveflow/archiveflow/internal/slotgate"
)

// claimGates are what makes this process's workers stop taking work, the
// one place that says which worker waits on what (docs/operations.md):
//
//   - every worker that takes claims — a pool's shared queues and its
//     routed-page queue (PageQueue: a locked crawl's pages) — reserves its
//     activity slots only while the disk guard is open (a low disk, a
//     host-wide maintenance), and hands back a claim a poller took just as
//     it closed (slotgate.Refuser) or, on a locked pipeline, another job's
//     claim (pipelinelock's interceptor);
//   - the shared queues' slots (the pool's, shared between them) also
//     wait on the claim lock: a locked pipeline takes its job's pages on
//     its routed-page queue (slots of its own) instead;
//   - the host queue's work (HostQueue: the hooks, setup and teardown of
//     what this process already claimed) waits on nothing and runs on.
type claimGates struct {
	guard *diskguard.Guard      // nil: none
	lock  *pipelinelock.Watcher // nil: none
	log   *zap.Logger
}

// gates are the gates a claiming worker's slots wait on; shared adds the
// claim lock (the shared queues').
func (g claimGates) gates(shared bool) []slotgate.Gate {
	var gs []slotgate.Gate
	if g.guard != nil {
		gs = append(gs, g.guard)
	}
	if shared && g.lock != nil {
		gs = append(gs, g.lock)
	}
	return gs
}

// interceptors are opts' interceptors and the refusals of every claiming
// worker.
func (g claimGates) interceptors(opts []interceptor.WorkerInterceptor) []interceptor.WorkerInterceptor {
	opts = slices.Clip(opts)
	if g.lock != nil {
		opts = append(opts, g.lock.Interceptor())
	}
	if g.guard != nil {
		// A claim a poller took just as the guard began to hold (a
		// host-wide maintenance, a low disk) goes back to the queue.
		opts = append(opts, slotgate.Refuser(g.guard, g.log))
	}
	return opts
}

// slots are the activity slots of pool p's claiming workers: the shared
// queues share the pool's slots (waiting on the gates with the claim
// lock's); the routed-page queue has slots of its own, as many, waiting on
// the others. (A poller holds its slot while it polls: an idle routed-page
// queue sharing the pool's slots would keep them from the shared queues.)
func (g claimGates) slots(p config.Pool) (shared, routed worker.SlotSupplier, err error) {
	sharedFixed, err := worker.NewFixedSizeSlotSupplier(p.Slots)
	if err != nil {
		return nil, nil, fmt.Errorf("worker slots: %w", err)
	}
	routedFixed, err := worker.NewFixedSizeSlotSupplier(p.Slots)
	if err != nil {
		return nil, nil, fmt.Errorf("worker slots: %w", err)
	}
	return slotgate.Supplier(sharedFixed, g.gates(true)...), slotgate.Supplier(routedFixed, g.gates(false)...), nil
}

// options are opts of a claiming worker whose activity slots come from
// slots, with the claim refusals.
func (g claimGates) options(opts worker.Options, slots worker.SlotSupplier) (worker.Options, error) {
	opts, err := gatedOptions(opts, slots)
	if err != nil {
		return opts, err
	}
	opts.Interceptors = g.interceptors(opts.Interceptors)
	return opts, nil
}

// PageQueue is the task queue of pool p's routed pages on this process
// (HostQueue + rkeys.PageQueueSuffix): a crawl locked to this pipeline
// sends its pages and batches there (rkeys.Store.LockedHostQueues), and
// they wait on the disk guard as the shared queues' claims do.
func PageQueue(p config.Pool, instance string) string {
	return HostQueue(p, instance) + rkeys.PageQueueSuffix
}
