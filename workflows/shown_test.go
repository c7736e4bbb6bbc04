package workflows

import (
	"testing"

	"github.com/stretchr/testify/mock"
	"github.com/stretchr/testify/require"
	sdkpb "go.temporal.io/api/sdk/v1"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/testsuite"

	"github.com/archiveflow/archiveflow/internal/searchattr"
)

// What a job's workflow shows (jobcontrol.go shownState), as the tests of
// both workflows read it.

// WatchShownStates records the ArchiveflowState values env's run upserts,
// in order.
func WatchShownStates(env *testsuite.TestWorkflowEnvironment) *[]string {
	var states []string
	env.OnUpsertTypedSearchAttributes(mock.Anything).Run(func(args mock.Arguments) {
		if v, ok := args.Get(0).(temporal.SearchAttributes).GetKeyword(searchattr.State); ok {
			states = append(states, v)
		}
	}).Return()
	return &states
}

// CurrentDetails is env's run's current details line (the Web UI's).
func CurrentDetails(t *testing.T, env *testsuite.TestWorkflowEnvironment) string {
	t.Helper()
	v, err := env.QueryWorkflow("__temporal_workflow_metadata")
	require.NoError(t, err)
	var md sdkpb.WorkflowMetadata
	require.NoError(t, v.Get(&md))
	return md.GetCurrentDetails()
}

// CountOf counts v in s.
func CountOf(s []string, v string) int {
	n := 0
	for _, x := range s {
		if x == v {
			n++
		}
	}
	return n
}
