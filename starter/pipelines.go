package main

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"
)

func pipelinesCommand() *command {
	return &command{
		name:    "pipelines",
		args:    "",
		summary: "list the worker processes registered in Redis (pipeline:ID)",
		examples: []string{
			"starter pipelines",
			"starter pipelines --json",
		},
		run: runPipelines,
	}
}

// pipelineJSON is the --json form of one pipeline.
type pipelineJSON struct {
	ID         string            `json:"id"`
	Hostname   string            `json:"hostname"`
	Nickname   string            `json:"nickname,omitempty"`
	PID        string            `json:"pid"`
	Status     string            `json:"status,omitempty"`
	TaskQueues []string          `json:"task_queues"`
	LastSeen   time.Time         `json:"last_seen"`
	Fields     map[string]string `json:"fields"`
}

func runPipelines(ctx context.Context, a *app, inv *invocation) error {
	if len(inv.args) > 0 {
		return usageErr("takes no arguments, got %q", inv.args)
	}
	b, err := a.connectRedis(ctx, inv)
	if err != nil {
		return err
	}
	defer b.Close()
	views, err := b.Store.ListPipelines(ctx)
	if err != nil {
		return withCode(exitUnavailable, err)
	}
	out := make([]pipelineJSON, 0, len(views))
	for _, v := range views {
		p := pipelineJSON{
			ID: v.ID, Hostname: v.Fields["hostname"], Nickname: v.Fields["nickname"], PID: v.Fields["pid"],
			Status: v.Fields["status"], LastSeen: v.TS, Fields: v.Fields, TaskQueues: []string{},
		}
		if q := v.Fields["task_queues"]; q != "" {
			if err := json.Unmarshal([]byte(q), &p.TaskQueues); err != nil {
				inv.log.Warn(fmt.Sprintf("pipeline %s: task_queues %q: not a JSON list", v.ID, q))
			}
		}
		out = append(out, p)
	}
	if inv.json {
		return writeJSON(a.stdout, map[string]any{"pipelines": out})
	}
	if len(out) == 0 {
		fmt.Fprintln(a.stdout, "no pipelines registered (no worker is running against this Redis)")
		return nil
	}
	fmt.Fprintf(a.stdout, "%-32s  %-20s  %7s  %-9s  %-8s  %s\n", "ID", "HOST", "PID", "STATUS", "SEEN", "TASK QUEUES")
	for _, p := range out {
		host := p.Hostname
		if p.Nickname != "" {
			host = p.Nickname
		}
		fmt.Fprintf(a.stdout, "%-32s  %-20s  %7s  %-9s  %-8s  %s\n", p.ID, host, p.PID, p.Status,
			a.now().Sub(p.LastSeen).Round(time.Second).String()+" ago", strings.Join(p.TaskQueues, ","))
	}
	return nil
}
