package main

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/sdk/temporal"

	"github.com/archiveflow/archiveflow/internal/model"
	"github.com/archiveflow/archiveflow/workflows"
)

// TestAwaitEndFollowsARunningJobPastCutShortWaits: a long poll that hit
// its deadline or found the server unavailable is asked again; the job's
// real end (a result, or the workflow's own failure) is what is returned.
func TestAwaitEndFollowsARunningJobPastCutShortWaits(t *testing.T) {
	cutShort := []error{
		context.DeadlineExceeded,
		fmt.Errorf("get workflow result: %w", context.DeadlineExceeded),
		serviceerror.NewDeadlineExceeded("context deadline exceeded"),
		serviceerror.NewUnavailable("frontend restarting"),
		fmt.Errorf("poll: %w", serviceerror.NewDeadlineExceeded("long poll")),
	}
	calls := 0
	st, err := awaitEnd(context.Background(), func(_ context.Context, st *workflows.Status) error {
		calls++
		if calls <= len(cutShort) {
			return cutShort[calls-1]
		}
		st.State = model.StateFinished
		return nil
	}, time.Millisecond)
	require.NoError(t, err)
	assert.Equal(t, model.StateFinished, st.State)
	assert.Equal(t, len(cutShort)+1, calls)

	ended := temporal.NewCanceledError("aborted")
	calls = 0
	_, err = awaitEnd(context.Background(), func(context.Context, *workflows.Status) error {
		calls++
		return ended
	}, time.Millisecond)
	assert.Same(t, ended, err, "a workflow's own end is returned at once")
	assert.Equal(t, 1, calls)

	notFound := serviceerror.NewNotFound("workflow not found")
	_, err = awaitEnd(context.Background(), func(context.Context, *workflows.Status) error { return notFound }, time.Millisecond)
	assert.True(t, errors.As(err, new(*serviceerror.NotFound)), "a missing workflow is not waited for forever")
}

// TestAwaitEndStopsWithItsContext: an interrupted wait returns the
// context's error (the caller reports exit 6, the jobs keep running).
func TestAwaitEndStopsWithItsContext(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	calls := 0
	_, err := awaitEnd(ctx, func(context.Context, *workflows.Status) error {
		calls++
		if calls == 3 {
			cancel()
		}
		return context.DeadlineExceeded
	}, time.Millisecond)
	assert.ErrorIs(t, err, context.Canceled)
	assert.Equal(t, 3, calls)
}
