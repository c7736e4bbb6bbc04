package slotgate

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/worker"
)

// A slot is reserved only while every gate is open; a waiting reservation
// gets its slot once the last closed gate opens.
func TestSlotsWaitOnEveryGate(t *testing.T) {
	inner, err := worker.NewFixedSizeSlotSupplier(2)
	require.NoError(t, err)
	var disk, lock Switch
	s := Supplier(inner, &disk, &lock)
	assert.Equal(t, 2, s.MaxSlots())
	require.NotNil(t, s.TryReserveSlot(nil), "open gates: a slot")

	assert.True(t, disk.Set("disk low"))
	assert.False(t, disk.Set("disk still low"), "closed already")
	assert.True(t, lock.Set("locked"))
	assert.Nil(t, s.TryReserveSlot(nil))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	got := make(chan error, 1)
	go func() {
		_, err := s.ReserveSlot(ctx, nil)
		got <- err
	}()
	assert.True(t, disk.Set(""))
	short, stop := context.WithTimeout(ctx, 200*time.Millisecond)
	defer stop()
	_, err = s.ReserveSlot(short, nil)
	require.ErrorIs(t, err, context.DeadlineExceeded, "the lock still holds")
	select {
	case err := <-got:
		t.Fatalf("reserved while a gate is closed (err %v)", err)
	default:
	}
	assert.True(t, lock.Set(""))
	require.NoError(t, <-got, "every gate open: the waiting reservation gets its slot")
	assert.Nil(t, s.TryReserveSlot(nil), "both slots taken")
}

// Workers given one Supplier share its slots.
func TestSharedSupplierSharesSlots(t *testing.T) {
	inner, err := worker.NewFixedSizeSlotSupplier(1)
	require.NoError(t, err)
	var open Switch
	shared := Supplier(inner, &open)
	require.NotNil(t, shared.TryReserveSlot(nil), "the general queue's worker takes the one slot")
	assert.Nil(t, shared.TryReserveSlot(nil), "the tag queue's worker finds none left")
	assert.Same(t, inner, Supplier(inner), "no gate: the supplier itself")
}
