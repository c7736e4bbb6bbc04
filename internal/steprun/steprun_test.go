package steprun

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// journal records what the attempts saw, in order.
type journal struct {
	mu     sync.Mutex
	events []string
}

func (j *journal) add(s string) {
	j.mu.Lock()
	j.events = append(j.events, s)
	j.mu.Unlock()
}

func (j *journal) all() []string {
	j.mu.Lock()
	defer j.mu.Unlock()
	return append([]string(nil), j.events...)
}

var names = []string{"a", "b", "c", "d", "e"}

func TestStepsRunInOrderAndAStepWaitsForItsHooks(t *testing.T) {
	hooks := []Hook{{Step: 0}, {Step: 0}, {Step: 3}, {Step: 5}}
	var j journal
	var running, most atomic.Int32
	release := make(chan struct{})
	var steps []int
	end := Run(context.Background(), hooks, Policy{Limit: func(int) int { return 2 }, OnStep: func(s int) { steps = append(steps, s) }},
		func(ctx context.Context, i int, _ func()) Class {
			n := running.Add(1)
			defer running.Add(-1)
			for {
				m := most.Load()
				if n <= m || most.CompareAndSwap(m, n) {
					break
				}
			}
			if i < 2 {
				// Both hooks of step 0 run at once: each waits for the other.
				if n == 2 {
					close(release)
				}
				<-release
			}
			j.add(names[i])
			return Final
		})
	assert.Equal(t, Final, end)
	assert.Equal(t, []int{0, 3, 5}, steps)
	ev := j.all()
	require.Len(t, ev, 4)
	assert.ElementsMatch(t, []string{"a", "b"}, ev[:2])
	assert.Equal(t, []string{"c", "d"}, ev[2:])
	assert.EqualValues(t, 2, most.Load())
}

func TestAStepWithARetryIsTheLast(t *testing.T) {
	for _, c := range []Class{Retry, Config} {
		t.Run(c.String(), func(t *testing.T) {
			hooks := []Hook{{Step: 1}, {Step: 1}, {Step: 2}}
			var j journal
			end := Run(context.Background(), hooks, Policy{}, func(ctx context.Context, i int, _ func()) Class {
				j.add(names[i])
				if i == 0 {
					return c
				}
				return Final
			})
			assert.Equal(t, c, end)
			// The step's other hook still runs; the next step does not.
			assert.Equal(t, []string{"a", "b"}, j.all())
		})
	}
}

func TestKeepGoingRunsEveryStep(t *testing.T) {
	hooks := []Hook{{Step: 1}, {Step: 2}}
	var j journal
	end := Run(context.Background(), hooks, Policy{KeepGoing: true}, func(ctx context.Context, i int, _ func()) Class {
		j.add(names[i])
		return Retry
	})
	assert.Equal(t, Final, end)
	assert.Equal(t, []string{"a", "b"}, j.all())
}

func TestBackgroundHooksTakeNoSlotAndEndWithTheRun(t *testing.T) {
	hooks := []Hook{{Step: 0, Background: true}, {Step: 0}, {Step: 4}}
	var j journal
	bgStopped := make(chan struct{})
	end := Run(context.Background(), hooks, Policy{}, func(ctx context.Context, i int, _ func()) Class {
		if i == 0 {
			<-ctx.Done() // a daemon: runs until told to stop
			close(bgStopped)
			return Final
		}
		j.add(names[i])
		return Final
	})
	assert.Equal(t, Final, end)
	select {
	case <-bgStopped:
	default:
		t.Fatal("Run returned before its background hook ended")
	}
	assert.Equal(t, []string{"b", "c"}, j.all())
}

func TestBackgroundHooksOnTheirOwnContextOutliveTheRun(t *testing.T) {
	bgCtx, stop := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	started := make(chan struct{})
	Run(context.Background(), []Hook{{Step: 9, Background: true}}, Policy{Background: bgCtx, BackgroundDone: &wg},
		func(ctx context.Context, i int, _ func()) Class {
			close(started)
			<-ctx.Done()
			return Final
		})
	<-started
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	select {
	case <-done:
		t.Fatal("the background hook ended with the run")
	default:
	}
	stop()
	<-done
}

func TestLimitZeroPausesUntilItRises(t *testing.T) {
	var limit atomic.Int32
	var idles atomic.Int32
	ran := make(chan struct{})
	go func() {
		// Resume once the runner has been seen waiting.
		deadline := time.Now().Add(10 * time.Second)
		for idles.Load() < 2 && time.Now().Before(deadline) {
			time.Sleep(5 * time.Millisecond)
		}
		limit.Store(1)
	}()
	end := Run(context.Background(), []Hook{{Step: 0}}, Policy{Limit: func(int) int { return int(limit.Load()) }, Poll: 10 * time.Millisecond, Idle: func() { idles.Add(1) }},
		func(ctx context.Context, i int, _ func()) Class {
			close(ran)
			return Final
		})
	assert.Equal(t, Final, end)
	<-ran
	assert.GreaterOrEqual(t, idles.Load(), int32(2))
}

func TestCancellationStopsTheRun(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	var j journal
	end := Run(ctx, []Hook{{Step: 0}, {Step: 1}}, Policy{}, func(ctx context.Context, i int, _ func()) Class {
		j.add(names[i])
		cancel()
		<-ctx.Done()
		return Cancelled
	})
	assert.Equal(t, Cancelled, end)
	assert.Equal(t, []string{"a"}, j.all())
}

func TestClassify(t *testing.T) {
	boom := errors.New("boom")
	cases := []struct {
		e    Ending
		want Class
	}{
		{Ending{}, Final},
		{Ending{Transient: true}, Retry},
		{Ending{Err: boom}, Retry},
		{Ending{Err: boom, ConfigErr: true}, Config},
		{Ending{Cancelled: true}, Final},
		{Ending{Cancelled: true, Transient: true}, Cancelled},
		{Ending{Cancelled: true, Err: boom}, Cancelled},
		{Ending{Cancelled: true, Background: true, Transient: true}, Final},
		{Ending{Cancelled: true, WorkerStopping: true}, Retry},
		{Ending{Cancelled: true, WorkerStopping: true, Background: true}, Retry},
		{Ending{Cancelled: true, ConfigErr: true, Err: boom}, Config},
	}
	for _, c := range cases {
		assert.Equal(t, c.want, Classify(c.e), "%+v", c.e)
	}
}

// A hook after a background hook is launched only once that one is ready
// (abx-dl's rule): the tab's session exists before navigate starts.
func TestTheNextHookWaitsForABackgroundHookToBeReady(t *testing.T) {
	hooks := []Hook{{Step: 0, Background: true}, {Step: 1, Background: true}, {Step: 3}}
	var j journal
	stop := make(chan struct{})
	end := Run(context.Background(), hooks, Policy{ReadyWait: func(int) time.Duration { return time.Minute }},
		func(ctx context.Context, i int, ready func()) Class {
			switch i {
			case 0, 1:
				j.add(names[i] + " starting")
				j.add(names[i] + " ready")
				ready()
				ready() // more than once is fine
				select {
				case <-ctx.Done():
				case <-stop:
				}
			default:
				j.add(names[i])
				close(stop)
			}
			return Final
		})
	assert.Equal(t, Final, end)
	assert.Equal(t, []string{"a starting", "a ready", "b starting", "b ready", "c"}, j.all())
}

// A background hook that ends without printing, or never gets ready, lets
// the next hook start: at its end, or when its wait runs out.
func TestABackgroundHookThatIsNeverReadyHoldsUpToItsWait(t *testing.T) {
	var notReady []int
	var j journal
	hold := make(chan struct{})
	Run(context.Background(), []Hook{{Step: 0, Background: true}, {Step: 0, Background: true}, {Step: 1}},
		Policy{ReadyWait: func(i int) time.Duration { return 20 * time.Millisecond }, NotReady: func(i int) { notReady = append(notReady, i) }},
		func(ctx context.Context, i int, ready func()) Class {
			switch i {
			case 0:
				j.add("a ended") // exits at once, never ready
			case 1:
				<-hold // silent until the run ends
			default:
				j.add("c")
				close(hold)
			}
			return Final
		})
	assert.Equal(t, []string{"a ended", "c"}, j.all())
	assert.Equal(t, []int{1}, notReady)
}
