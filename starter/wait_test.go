package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
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

// The files line names the job's directory where it is: under this host's
// archive dir when it is there (with the index page to open), else where
// the worker sealed its WACZ, on that worker host; never this host's
// archive dir for files it does not have.
func TestFilesLineSaysWhereTheJobsFilesAre(t *testing.T) {
	here := filepath.Join(t.TempDir(), "snapshots", "abc")
	require.NoError(t, os.MkdirAll(filepath.Join(here, "index"), 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(here, "index", "index.html"), nil, 0o644))
	worker := "/srv/archive/snapshots/abc"
	z := &waczJSON{File: worker + "/abc.wacz", Host: "box7"}

	o := &outcome{OutputDir: filesDir(here, z), WACZ: z}
	assert.Equal(t, here+"  (open index/index.html)", filesLine(o.OutputDir, o.workerHost()))

	missing := filepath.Join(t.TempDir(), "snapshots", "abc")
	o = &outcome{OutputDir: filesDir(missing, z), WACZ: z}
	assert.Equal(t, worker+" on worker host box7", filesLine(o.OutputDir, o.workerHost()))

	o = &outcome{OutputDir: filesDir(missing, nil), HostQueue: "archiveflow@box7-12"}
	assert.Equal(t, missing+" on the worker host of archiveflow@box7-12", filesLine(o.OutputDir, o.workerHost()))
	o = &outcome{OutputDir: filesDir(missing, &waczJSON{Error: "no WARC"})}
	assert.Equal(t, missing+" on the worker host that ran the job", filesLine(o.OutputDir, o.workerHost()))
}
