package main

import (
	"context"
	"fmt"
	"time"

	"go.temporal.io/sdk/workflow"
)

// BareWorkflowName is the workflow type bench/throughput starts.
const BareWorkflowName = "BareSnapshot"

// BareInput is the shape of one bare snapshot.
type BareInput struct {
	Steps        int `json:"steps"`
	HooksPerStep int `json:"hooks_per_step"`
	// Concurrency bounds the activities of a step running at once.
	Concurrency int `json:"concurrency"`
}

// BareSnapshot runs in.Steps steps of in.HooksPerStep Noop activities, at
// most in.Concurrency at a time, each step after the previous one.
func BareSnapshot(ctx workflow.Context, in BareInput) error {
	if in.Steps < 1 || in.HooksPerStep < 1 || in.Concurrency < 1 {
		return fmt.Errorf("bare input %+v: steps, hooks_per_step and concurrency must be >= 1", in)
	}
	ctx = workflow.WithActivityOptions(ctx, workflow.ActivityOptions{StartToCloseTimeout: time.Minute})
	for step := range in.Steps {
		running := 0
		var failed error
		for range in.HooksPerStep {
			if err := workflow.Await(ctx, func() bool { return running < in.Concurrency }); err != nil {
				return err
			}
			running++
			f := workflow.ExecuteActivity(ctx, Noop, step)
			workflow.Go(ctx, func(c workflow.Context) {
				defer func() { running-- }()
				if err := f.Get(c, nil); err != nil && failed == nil {
					failed = err
				}
			})
		}
		if err := workflow.Await(ctx, func() bool { return running == 0 }); err != nil {
			return err
		}
		if failed != nil {
			return fmt.Errorf("step %d: %w", step, failed)
		}
	}
	return nil
}

// Noop is the bare hook: it does nothing.
func Noop(context.Context, int) error { return nil }
