package diskguard

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/worker"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"
)

// fakeDisk is an injectable free-space reading.
type fakeDisk struct {
	free atomic.Int64
	err  atomic.Pointer[error]
}

func (d *fakeDisk) read(string) (int64, error) {
	if e := d.err.Load(); e != nil {
		return 0, *e
	}
	return d.free.Load(), nil
}

func newGuard(t *testing.T, free int64) (*Guard, *fakeDisk, *observer.ObservedLogs) {
	t.Helper()
	d := &fakeDisk{}
	d.free.Store(free)
	core, logs := observer.New(zap.InfoLevel)
	g, err := New("/archive", 1<<30, d.read, zap.New(core))
	require.NoError(t, err)
	return g, d, logs
}

func TestGuardSaysWhenLowAndWhenBack(t *testing.T) {
	g, d, logs := newGuard(t, 5<<30)
	var changes atomic.Int32
	g.OnChange(func() { changes.Add(1) })
	assert.False(t, g.Check())
	assert.Empty(t, g.Reason())
	assert.Zero(t, changes.Load(), "no change, no call")

	d.free.Store(512 << 20)
	assert.True(t, g.Check())
	assert.Equal(t, "archive disk low: 512 MiB free, under worker.min_free_disk 1 GiB: not claiming work", g.Reason())
	assert.EqualValues(t, 1, changes.Load())
	assert.True(t, g.Check())
	assert.EqualValues(t, 1, changes.Load(), "still low: no new call")
	require.Equal(t, 1, logs.FilterMessageSnippet("archive disk low").Len(), "said once in the log")

	broken := errors.New("statfs: no such file")
	d.err.Store(&broken)
	assert.True(t, g.Check(), "a failed reading keeps the state")
	d.err.Store(nil)

	d.free.Store(1 << 30) // exactly the minimum is enough
	assert.False(t, g.Check())
	assert.Empty(t, g.Reason())
	assert.EqualValues(t, 2, changes.Load())
	assert.Equal(t, 1, logs.FilterMessageSnippet("has space again").Len())
}

func TestNewRefusesAnOffGuard(t *testing.T) {
	_, err := New("/a", -1, func(string) (int64, error) { return 0, nil }, nil)
	require.ErrorContains(t, err, "min free -1: must be >= 0")
	_, err = New("/a", 1, nil, nil)
	require.Error(t, err)
}

// A hold (a host-wide maintenance) stops the slots like a low disk, says
// why beside the disk's reason, and ends with its Release; a guard without
// a disk minimum reads no disk and only holds.
func TestAHoldStopsClaimingUntilReleased(t *testing.T) {
	g, err := New("/archive", 0, nil, nil)
	require.NoError(t, err)
	assert.False(t, g.Check(), "no minimum: never low")
	var changes atomic.Int32
	g.OnChange(func() { changes.Add(1) })
	inner, err := worker.NewFixedSizeSlotSupplier(1)
	require.NoError(t, err)
	s := g.SlotSupplier(inner)

	g.Hold("maintenance", "unscheduled maintenance of host-a until 2026-11-26T23:00:00Z: kernel")
	assert.Equal(t, "unscheduled maintenance of host-a until 2026-11-26T23:00:00Z: kernel: not claiming work", g.Reason())
	assert.EqualValues(t, 1, changes.Load())
	g.Hold("maintenance", "unscheduled maintenance of host-a until 2026-11-26T23:00:00Z: kernel")
	assert.EqualValues(t, 1, changes.Load(), "the same hold again changes nothing")
	assert.Nil(t, s.TryReserveSlot(worker.SlotReservationInfo(nil)), "no slot while held")
	short, stop := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer stop()
	_, err = s.ReserveSlot(short, worker.SlotReservationInfo(nil))
	require.ErrorIs(t, err, context.DeadlineExceeded, "a reservation waits while held")

	got := make(chan error, 1)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	go func() {
		_, err := s.ReserveSlot(ctx, worker.SlotReservationInfo(nil))
		got <- err
	}()
	g.Release("maintenance")
	require.NoError(t, <-got, "released: the waiting reservation gets its slot")
	assert.Empty(t, g.Reason())
	assert.EqualValues(t, 2, changes.Load())
	g.Release("maintenance")
	assert.EqualValues(t, 2, changes.Load(), "releasing nothing changes nothing")
}

// The disk and a hold together: both reasons, and the worker claims again
// only when neither holds it.
func TestDiskAndHoldTogether(t *testing.T) {
	g, d, _ := newGuard(t, 100)
	require.True(t, g.Check())
	g.Hold("maintenance", "maintenance of host-a")
	assert.Equal(t, "archive disk low: 100 B free, under worker.min_free_disk 1 GiB: not claiming work; maintenance of host-a: not claiming work", g.Reason())
	d.free.Store(2 << 30)
	require.False(t, g.Check())
	assert.Equal(t, "maintenance of host-a: not claiming work", g.Reason())
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	require.ErrorIs(t, g.Wait(ctx), context.DeadlineExceeded, "still held by the maintenance")
	g.Release("maintenance")
	require.NoError(t, g.Wait(context.Background()))
}

// The worker's activity slots wait while the disk is low: no slot, no
// poll, no task; they are handed out again once space is back.
func TestSlotsWaitWhileTheDiskIsLow(t *testing.T) {
	g, d, _ := newGuard(t, 100)
	require.True(t, g.Check())
	inner, err := worker.NewFixedSizeSlotSupplier(2)
	require.NoError(t, err)
	s := g.SlotSupplier(inner)
	assert.Equal(t, 2, s.MaxSlots())
	assert.Nil(t, s.TryReserveSlot(worker.SlotReservationInfo(nil)), "no eager slot while low")

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	got := make(chan error, 1)
	go func() {
		p, err := s.ReserveSlot(ctx, worker.SlotReservationInfo(nil))
		if err == nil && p == nil {
			err = errors.New("nil permit")
		}
		got <- err
	}()
	short, stop := context.WithTimeout(ctx, 200*time.Millisecond)
	defer stop()
	_, err = s.ReserveSlot(short, worker.SlotReservationInfo(nil))
	require.ErrorIs(t, err, context.DeadlineExceeded, "a reservation waits while the disk is low")
	select {
	case err := <-got:
		t.Fatalf("a slot was reserved while the disk is low (err %v)", err)
	default:
	}

	d.free.Store(2 << 30)
	require.False(t, g.Check())
	require.NoError(t, <-got, "space is back: the waiting reservation gets its slot")
}
