package workflows_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/archiveflow/archiveflow/internal/crawltest"
	"github.com/archiveflow/archiveflow/internal/model"
)

// TestLockedCrawlRunsItsPagesOnTheLockedPipeline: while a pipeline is
// locked to the crawl (the claim says which queues), every page and
// every page batch runs on the locked pipeline's routed-page queue, not
// on the pool's shared queue (whose slots a locked pipeline does not
// serve); unlocked, they run on the shared queue. A locked pipeline whose
// gates hold its routed pages (a host-wide maintenance, a low disk) past
// HostScheduleToStart, again and again, or hand them back at every
// attempt of an activity or batch neither fails nor loses them (held):
// they are released unstarted (no attempt spent: the fake fails a page
// at its third), claimed again and run once it takes them.
func TestLockedCrawlRunsItsPagesOnTheLockedPipeline(t *testing.T) {
	for _, batched := range []bool{false, true} {
		for _, mode := range []string{"unlocked", "locked", "held"} {
			fake := crawltest.New(40, 3)
			want := "q"
			if mode != "unlocked" {
				fake.Locked = []string{"q@locked-1/pages"}
				want = "q@locked-1/pages"
			}
			if mode == "held" {
				fake.LateLocked = 20   // more than the fake's 3 attempts of a page
				fake.RefuseLocked = 12 // 3 attempts each: at least 4 activities refused for good
			}
			in := crawlInput(4)
			if batched {
				in.Timing.BatchPages, in.Timing.BatchTime = 10, time.Minute
			}
			st, _ := runCrawl(t, fake, in)
			require.Equal(t, model.StateFinished, st.State)
			r := fake.Report()
			assert.EqualValues(t, 40, r.Done, "batched %v, %s", batched, mode)
			assert.Zero(t, r.Failed, "batched %v, %s: no page failed", batched, mode)
			assert.Empty(t, r.Twice)
			assert.Equal(t, map[string]int{want: 39}, r.Queues, "batched %v, %s: every page but the start page, once", batched, mode)
		}
	}
}
