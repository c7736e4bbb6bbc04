package slotgate

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/interceptor"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/testsuite"
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

// TestRefuserHandsBackClaimsWhileClosed: while the gate is closed a claim
// that reached the worker anyway (its poller reserved the slot before the
// gate closed) fails retryable before its work starts; other activities
// and claims once the gate is open run.
func TestRefuserHandsBackClaimsWhileClosed(t *testing.T) {
	var hold Switch
	ran := map[string]int{}
	claim := func(ctx context.Context) (string, error) { ran["ClaimHost"]++; return "claimed", nil }
	write := func(ctx context.Context) (string, error) { ran["SetStep"]++; return "written", nil }
	newEnv := func() *testsuite.TestActivityEnvironment {
		var s testsuite.WorkflowTestSuite
		env := s.NewTestActivityEnvironment()
		env.SetWorkerOptions(worker.Options{Interceptors: []interceptor.WorkerInterceptor{Refuser(&hold, nil)}})
		env.RegisterActivityWithOptions(claim, activity.RegisterOptions{Name: "ClaimHost"})
		env.RegisterActivityWithOptions(write, activity.RegisterOptions{Name: "SetStep"})
		return env
	}

	hold.Set("maintenance of host w1 until 12:00")
	_, err := newEnv().ExecuteActivity("ClaimHost")
	var appErr *temporal.ApplicationError
	require.ErrorAs(t, err, &appErr)
	assert.Equal(t, ErrTypeClosed, appErr.Type())
	assert.False(t, appErr.NonRetryable(), "the claim goes back to the queue for another worker")
	assert.Contains(t, appErr.Error(), "maintenance of host w1 until 12:00")
	assert.Zero(t, ran["ClaimHost"], "refused before it started")
	assert.True(t, Refused(fmt.Errorf("activity error: %w", err)), "a workflow tells a refusal apart")
	assert.False(t, Refused(temporal.NewApplicationError("boom", "Other")))
	v, err := newEnv().ExecuteActivity("SetStep")
	require.NoError(t, err, "not a claim: runs while held")
	var s string
	require.NoError(t, v.Get(&s))
	assert.Equal(t, "written", s)

	hold.Set("")
	v, err = newEnv().ExecuteActivity("ClaimHost")
	require.NoError(t, err)
	require.NoError(t, v.Get(&s))
	assert.Equal(t, "claimed", s)
	assert.Equal(t, 1, ran["ClaimHost"])
}
