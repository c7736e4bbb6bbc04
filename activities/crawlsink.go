package activities

import (
	"context"
	"sync"
	"time"

	"go.uber.org/zap"
)

// How a page batch gathers its pages' writes (issue 26: a round trip per
// many pages, never per page): a flush records the pages that ended when
// sinkPages are waiting or sinkEvery after the first of them ended,
// whichever comes first, and when the batch ends. A worker killed loses at
// most sinkEvery of ended pages, which its batch runs again.
const (
	sinkPages = 64
	sinkEvery = 200 * time.Millisecond
)

// pageSink gathers a page batch's ended pages and records them together
// (CrawlActivities.recordPages: CrawlStore.RecordPages), one flush at a
// time, in the order they ended. A flush that fails after its retries
// (Redis down past crawl.write_timeout) fails the batch; its pages stay
// CLAIMED and are run again with the batch.
type pageSink struct {
	b       *pageBatch
	ctx     context.Context // the batch's, without its cancel: ended pages are recorded
	mu      sync.Mutex
	pending []donePage
	kick    chan struct{} // a page ended
	closing chan struct{}
	stopped chan struct{}
}

func newPageSink(ctx context.Context, b *pageBatch) *pageSink {
	s := &pageSink{b: b, ctx: context.WithoutCancel(ctx), kick: make(chan struct{}, 1),
		closing: make(chan struct{}), stopped: make(chan struct{})}
	go s.run()
	return s
}

// add queues an ended page for the next flush.
func (s *pageSink) add(d donePage) {
	s.mu.Lock()
	s.pending = append(s.pending, d)
	s.mu.Unlock()
	nudge(s.kick)
}

// close records the pages still waiting and stops the sink.
func (s *pageSink) close() {
	close(s.closing)
	<-s.stopped
}

func (s *pageSink) waiting() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.pending)
}

func (s *pageSink) run() {
	defer close(s.stopped)
	for {
		select {
		case <-s.kick:
		case <-s.closing:
			for s.flush() {
			}
			return
		}
		t := time.NewTimer(sinkEvery)
	wait:
		for s.waiting() < sinkPages {
			select {
			case <-s.kick:
			case <-t.C:
				break wait
			case <-s.closing:
				break wait
			}
		}
		t.Stop()
		if s.flush() {
			nudge(s.kick) // pages left: gather again at once
		}
	}
}

// nudge wakes the loop that reads ch (one slot), never blocking.
func nudge(ch chan struct{}) {
	select {
	case ch <- struct{}{}:
	default:
	}
}

// flush records the oldest pages waiting, at most sinkPages of them (pages
// that ended while the loop decided to flush wait for the next one); it
// reports whether pages are left waiting.
func (s *pageSink) flush() (left bool) {
	s.mu.Lock()
	n := min(len(s.pending), sinkPages)
	pages := s.pending[:n:n]
	s.pending = s.pending[n:]
	left = len(s.pending) > 0
	s.mu.Unlock()
	if len(pages) == 0 {
		return false
	}
	b := s.b
	ctx, cancel := context.WithTimeout(s.ctx, b.a.opts.WriteTimeout)
	defer cancel()
	res, err := b.a.recordPages(ctx, pages)
	if err != nil {
		b.fail(err)
		return false
	}
	for i, r := range res {
		pages[i].log.Debug("page done", zap.String("status", r.Status), zap.Int("responses", r.Responses), zap.Int("queued", r.Queued))
	}
	b.recorded(res)
	return left
}
