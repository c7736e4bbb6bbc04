package jobctl

import (
	"context"
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/mock"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/mocks"

	"github.com/archiveflow/archiveflow/internal/model"
	"github.com/archiveflow/archiveflow/workflows"
)

// updating returns a client whose set_settings update for wf completes
// with outcome (setting the version to 7 when outcome is nil).
func updating(t *testing.T, wf, updateID string, outcome error) *mocks.Client {
	c := mocks.NewClient(t)
	h := mocks.NewWorkflowUpdateHandle(t)
	c.On("UpdateWorkflow", mock.Anything, mock.MatchedBy(func(o client.UpdateWorkflowOptions) bool {
		return o.WorkflowID == wf && o.UpdateID == updateID && o.UpdateName == workflows.UpdateSetSettings &&
			o.WaitForStage == client.WorkflowUpdateStageCompleted
	})).Return(h, nil)
	h.On("Get", mock.Anything, mock.Anything).Return(func(_ context.Context, out any) error {
		if outcome == nil {
			*out.(*int) = 7
		}
		return outcome
	})
	return c
}

func TestSetSettingsWaitsForTheWorkflowsVersion(t *testing.T) {
	c := updating(t, "job1", "bot-3", nil)
	v, err := SetSettings(context.Background(), c, "job1", "bot-3", model.Settings{})
	require.NoError(t, err)
	assert.Equal(t, 7, v)
}

func TestAnUpdateTheWorkflowRejectsIsRefused(t *testing.T) {
	c := updating(t, "job1", "", errors.New("job is final"))
	_, err := SetSettings(context.Background(), c, "job1", "", model.Settings{})
	require.ErrorIs(t, err, ErrRefused)
	assert.Contains(t, err.Error(), "job1")
	assert.Contains(t, err.Error(), "job is final")
}

func TestADeadlineIsNotARefusal(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	c := updating(t, "job1", "", context.Canceled)
	_, err := SetSettings(ctx, c, "job1", "", model.Settings{})
	require.Error(t, err)
	assert.NotErrorIs(t, err, ErrRefused)

	c = updating(t, "job2", "", context.DeadlineExceeded)
	_, err = SetSettings(context.Background(), c, "job2", "", model.Settings{})
	require.ErrorIs(t, err, context.DeadlineExceeded)
	assert.NotErrorIs(t, err, ErrRefused)
}

func TestAConnectionErrorIsNotARefusal(t *testing.T) {
	c := mocks.NewClient(t)
	c.On("UpdateWorkflow", mock.Anything, mock.Anything).Return(nil, errors.New("connection refused"))
	_, err := SetRules(context.Background(), c, "job1", nil)
	require.Error(t, err)
	assert.NotErrorIs(t, err, ErrRefused)
	assert.Contains(t, err.Error(), "update rules of workflow job1")
}

func TestStatusDecodesTheQueriedStatus(t *testing.T) {
	c := mocks.NewClient(t)
	v := mocks.NewEncodedValue(t)
	v.On("Get", mock.Anything).Return(func(out any) error {
		out.(*workflows.Status).State = model.StateActive
		return nil
	})
	c.On("QueryWorkflow", mock.Anything, "job1", "", workflows.QueryStatus).Return(v, nil)
	var st workflows.Status
	require.NoError(t, Status(context.Background(), c, "job1", &st))
	assert.Equal(t, model.StateActive, st.State)
}

func TestAbortSignalsTheWorkflow(t *testing.T) {
	c := mocks.NewClient(t)
	req := workflows.AbortRequest{Reason: "r", By: "ArchiveBot"}
	c.On("SignalWorkflow", mock.Anything, "job1", "", workflows.SignalAbort, req).Return(nil)
	require.NoError(t, Abort(context.Background(), c, "job1", req))
}
