package benchkit

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	historypb "go.temporal.io/api/history/v1"
	"go.temporal.io/sdk/client"
)

// History reads every event of one workflow run (runID "" for the
// current run of id).
func History(ctx context.Context, c client.Client, id, runID string) ([]*historypb.HistoryEvent, error) {
	it := c.GetWorkflowHistory(ctx, id, runID, false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	var events []*historypb.HistoryEvent
	for it.HasNext() {
		ev, err := it.Next()
		if err != nil {
			return nil, fmt.Errorf("history of %s run %q: %w", id, runID, err)
		}
		events = append(events, ev)
	}
	return events, nil
}

// Breakdown splits one workflow run's wall time, read from its history,
// into where the time went around the activities of one type (the hooks).
type Breakdown struct {
	// Total is workflow started → workflow completed.
	Total time.Duration
	// Start is workflow started → first hook activity scheduled (host
	// claim, discovery and the workflow tasks between them).
	Start time.Duration
	// Dispatch sums, over hook activities, scheduled → started (history
	// transfer queue, matching, worker poll).
	Dispatch time.Duration
	// Run sums, over hook activities, started → completed (the worker runs
	// the hook process and reports back).
	Run time.Duration
	// Between sums, over the workflow tasks that scheduled hooks after the
	// first, the last hook completion before them → their first schedule
	// (workflow task dispatch and processing, local-activity Redis writes).
	Between time.Duration
	// End is the last hook completion → workflow completed (seal, final
	// Redis writes).
	End time.Duration
	// Hooks is the number of hook activities found; Batches the number of
	// workflow tasks that scheduled them.
	Hooks, Batches int
}

// HistoryBreakdown computes the Breakdown of a completed run's events for
// the activities named activityType.
func HistoryBreakdown(events []*historypb.HistoryEvent, activityType string) (Breakdown, error) {
	var b Breakdown
	var started, closed time.Time
	scheduled := map[int64]time.Time{}  // scheduled event ID → time
	startedAt := map[int64]time.Time{}  // scheduled event ID → started time
	batchOf := map[int64]int64{}        // scheduled event ID → workflow task completed ID
	var batches []int64                 // workflow tasks in schedule order
	batchFirst := map[int64]time.Time{} // workflow task → first schedule time
	batchPrevDone := map[int64]time.Time{}
	var lastDone time.Time
	for _, ev := range events {
		t := ev.GetEventTime().AsTime()
		switch ev.GetEventType() {
		case enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_STARTED:
			started = t
		case enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_COMPLETED:
			closed = t
		case enumspb.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED:
			a := ev.GetActivityTaskScheduledEventAttributes()
			if a.GetActivityType().GetName() != activityType {
				continue
			}
			scheduled[ev.GetEventId()] = t
			wft := a.GetWorkflowTaskCompletedEventId()
			batchOf[ev.GetEventId()] = wft
			if _, seen := batchFirst[wft]; !seen {
				batches = append(batches, wft)
				batchFirst[wft] = t
				batchPrevDone[wft] = lastDone
			}
		case enumspb.EVENT_TYPE_ACTIVITY_TASK_STARTED:
			id := ev.GetActivityTaskStartedEventAttributes().GetScheduledEventId()
			if _, ok := scheduled[id]; ok {
				startedAt[id] = t
			}
		case enumspb.EVENT_TYPE_ACTIVITY_TASK_COMPLETED:
			id := ev.GetActivityTaskCompletedEventAttributes().GetScheduledEventId()
			s, ok := startedAt[id]
			if !ok {
				continue
			}
			b.Hooks++
			b.Dispatch += s.Sub(scheduled[id])
			b.Run += t.Sub(s)
			lastDone = t
		}
	}
	if started.IsZero() || closed.IsZero() {
		return Breakdown{}, fmt.Errorf("history breakdown: %d events: want a started and a completed workflow", len(events))
	}
	if len(batches) == 0 {
		return Breakdown{}, fmt.Errorf("history breakdown: no completed %s activity in %d events", activityType, len(events))
	}
	b.Total = closed.Sub(started)
	b.Start = batchFirst[batches[0]].Sub(started)
	b.Batches = len(batches)
	for _, wft := range batches[1:] {
		if prev := batchPrevDone[wft]; !prev.IsZero() {
			b.Between += batchFirst[wft].Sub(prev)
		}
	}
	if !lastDone.IsZero() {
		b.End = closed.Sub(lastDone)
	}
	return b, nil
}

// EventCounts are the events of one or more workflow runs, by type.
type EventCounts struct {
	// Events counts every event; WorkflowTasks the completed workflow tasks.
	Events, WorkflowTasks int
	// ByType counts events by type name (e.g. "ActivityTaskScheduled",
	// "MarkerRecorded").
	ByType map[string]int
}

// Add counts the events of one run.
func (c *EventCounts) Add(events []*historypb.HistoryEvent) {
	if c.ByType == nil {
		c.ByType = map[string]int{}
	}
	for _, ev := range events {
		c.Events++
		if ev.GetEventType() == enumspb.EVENT_TYPE_WORKFLOW_TASK_COMPLETED {
			c.WorkflowTasks++
		}
		c.ByType[ev.GetEventType().String()]++
	}
}

// Merge adds the counts of o.
func (c *EventCounts) Merge(o EventCounts) {
	c.Events += o.Events
	c.WorkflowTasks += o.WorkflowTasks
	if c.ByType == nil {
		c.ByType = map[string]int{}
	}
	for k, v := range o.ByType {
		c.ByType[k] += v
	}
}

// PerUnit renders the counts by type divided by n, largest first, e.g.
// "ActivityTaskScheduled 1.05, MarkerRecorded 1.00, …".
func (c EventCounts) PerUnit(n float64) string {
	types := make([]string, 0, len(c.ByType))
	for t := range c.ByType {
		types = append(types, t)
	}
	slices.SortFunc(types, func(a, b string) int {
		if d := c.ByType[b] - c.ByType[a]; d != 0 {
			return d
		}
		return strings.Compare(a, b)
	})
	parts := make([]string, len(types))
	for i, t := range types {
		parts[i] = fmt.Sprintf("%s %.2f", t, float64(c.ByType[t])/n)
	}
	return strings.Join(parts, ", ")
}
