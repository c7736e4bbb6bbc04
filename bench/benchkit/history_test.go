package benchkit

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	commonpb "go.temporal.io/api/common/v1"
	enumspb "go.temporal.io/api/enums/v1"
	historypb "go.temporal.io/api/history/v1"
	"google.golang.org/protobuf/types/known/timestamppb"
)

type hist struct {
	t0     time.Time
	events []*historypb.HistoryEvent
}

func (h *hist) add(ms int, typ enumspb.EventType, set func(*historypb.HistoryEvent)) int64 {
	ev := &historypb.HistoryEvent{EventId: int64(len(h.events) + 1), EventType: typ,
		EventTime: timestamppb.New(h.t0.Add(time.Duration(ms) * time.Millisecond))}
	if set != nil {
		set(ev)
	}
	h.events = append(h.events, ev)
	return ev.EventId
}

func (h *hist) schedule(ms int, name string, wft int64) int64 {
	return h.add(ms, enumspb.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED, func(ev *historypb.HistoryEvent) {
		ev.Attributes = &historypb.HistoryEvent_ActivityTaskScheduledEventAttributes{ActivityTaskScheduledEventAttributes: &historypb.ActivityTaskScheduledEventAttributes{
			ActivityType: &commonpb.ActivityType{Name: name}, WorkflowTaskCompletedEventId: wft}}
	})
}

func (h *hist) start(ms int, sched int64) {
	h.add(ms, enumspb.EVENT_TYPE_ACTIVITY_TASK_STARTED, func(ev *historypb.HistoryEvent) {
		ev.Attributes = &historypb.HistoryEvent_ActivityTaskStartedEventAttributes{ActivityTaskStartedEventAttributes: &historypb.ActivityTaskStartedEventAttributes{ScheduledEventId: sched}}
	})
}

func (h *hist) complete(ms int, sched int64) {
	h.add(ms, enumspb.EVENT_TYPE_ACTIVITY_TASK_COMPLETED, func(ev *historypb.HistoryEvent) {
		ev.Attributes = &historypb.HistoryEvent_ActivityTaskCompletedEventAttributes{ActivityTaskCompletedEventAttributes: &historypb.ActivityTaskCompletedEventAttributes{ScheduledEventId: sched}}
	})
}

// TestHistoryBreakdown builds a history of a claim activity and two steps
// (two hooks, then one) and checks each component.
func TestHistoryBreakdown(t *testing.T) {
	h := &hist{t0: time.Unix(1000, 0)}
	h.add(0, enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_STARTED, nil)
	c := h.schedule(2, "ClaimHost", 1)
	h.start(3, c)
	h.complete(5, c)
	a := h.schedule(10, "RunHook", 7)
	b := h.schedule(10, "RunHook", 7)
	h.start(12, a)
	h.start(13, b)
	h.complete(20, a)
	h.complete(25, b)
	d := h.schedule(31, "RunHook", 20)
	h.start(34, d)
	h.complete(44, d)
	h.add(50, enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_COMPLETED, nil)

	br, err := HistoryBreakdown(h.events, "RunHook")
	require.NoError(t, err)
	ms := time.Millisecond
	assert.Equal(t, Breakdown{Total: 50 * ms, Start: 10 * ms, Dispatch: (2 + 3 + 3) * ms, Run: (8 + 12 + 10) * ms,
		Between: 6 * ms, End: 6 * ms, Hooks: 3, Batches: 2}, br)
}

func TestHistoryBreakdownErrors(t *testing.T) {
	h := &hist{t0: time.Unix(1000, 0)}
	h.add(0, enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_STARTED, nil)
	_, err := HistoryBreakdown(h.events, "RunHook")
	assert.ErrorContains(t, err, "want a started and a completed workflow")
	h.add(5, enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_COMPLETED, nil)
	_, err = HistoryBreakdown(h.events, "RunHook")
	assert.ErrorContains(t, err, "no completed RunHook activity")
}

func TestEventCountsAddAndPerUnit(t *testing.T) {
	h := &hist{t0: time.Unix(0, 0)}
	h.add(0, enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_STARTED, nil)
	for range 2 {
		h.add(1, enumspb.EVENT_TYPE_WORKFLOW_TASK_SCHEDULED, nil)
		h.add(2, enumspb.EVENT_TYPE_WORKFLOW_TASK_STARTED, nil)
		h.add(3, enumspb.EVENT_TYPE_WORKFLOW_TASK_COMPLETED, nil)
	}
	h.add(4, enumspb.EVENT_TYPE_MARKER_RECORDED, nil)
	var c EventCounts
	c.Add(h.events)
	c.Add(h.events[:1])
	assert.Equal(t, 9, c.Events)
	assert.Equal(t, 2, c.WorkflowTasks)
	assert.Equal(t, 2, c.ByType["WorkflowExecutionStarted"])
	assert.Equal(t, "WorkflowExecutionStarted 1.00, WorkflowTaskCompleted 1.00, WorkflowTaskScheduled 1.00, WorkflowTaskStarted 1.00, MarkerRecorded 0.50", c.PerUnit(2))
}
