package main

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/archiveflow/archiveflow/internal/rkeys"
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
	ID         string          `json:"id"`
	Hostname   string          `json:"hostname"`
	Nickname   string          `json:"nickname,omitempty"`
	PID        string          `json:"pid"`
	Status     string          `json:"status,omitempty"`
	TaskQueues []string        `json:"task_queues"`
	LastSeen   time.Time       `json:"last_seen"`
	LogOutbox  *logBacklogJSON `json:"log_outbox,omitempty"`
	// NotClaiming says why the worker claims no work (the disk guard),
	// rkeys.FieldNotClaiming; empty while it claims.
	NotClaiming string            `json:"not_claiming,omitempty"`
	Fields      map[string]string `json:"fields"`
}

// logBacklogJSON is a host's job-log outbox: batches waiting for Redis and
// batches refused for good (kept in ARCHIVE_DIR/outbox/rejected/).
type logBacklogJSON struct {
	Pending  int `json:"pending"`
	Rejected int `json:"rejected"`
}

// parseLogBacklog reads the log_outbox_* fields; nil when the worker does
// not report them.
func parseLogBacklog(id string, f map[string]string, log func(string)) *logBacklogJSON {
	if f["log_outbox_pending"] == "" && f["log_outbox_rejected"] == "" {
		return nil
	}
	var b logBacklogJSON
	for _, c := range []struct {
		field string
		dst   *int
	}{{"log_outbox_pending", &b.Pending}, {"log_outbox_rejected", &b.Rejected}} {
		n, err := strconv.Atoi(f[c.field])
		if err != nil || n < 0 {
			log(fmt.Sprintf("pipeline %s: %s %q: must be a count (non-negative integer)", id, c.field, f[c.field]))
			return nil
		}
		*c.dst = n
	}
	return &b
}

// String is the backlog as the table shows it.
func (b *logBacklogJSON) String() string {
	switch {
	case b == nil:
		return "-"
	case b.Rejected > 0:
		return fmt.Sprintf("%d waiting, %d rejected", b.Pending, b.Rejected)
	case b.Pending > 0:
		return fmt.Sprintf("%d waiting", b.Pending)
	default:
		return "0"
	}
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
			NotClaiming: v.Fields[rkeys.FieldNotClaiming],
		}
		if q := v.Fields["task_queues"]; q != "" {
			if err := json.Unmarshal([]byte(q), &p.TaskQueues); err != nil {
				inv.log.Warn(fmt.Sprintf("pipeline %s: task_queues %q: not a JSON list", v.ID, q))
			}
		}
		p.LogOutbox = parseLogBacklog(v.ID, v.Fields, func(m string) { inv.log.Warn(m) })
		out = append(out, p)
	}
	if inv.json {
		return writeJSON(a.stdout, map[string]any{"pipelines": out})
	}
	if len(out) == 0 {
		fmt.Fprintln(a.stdout, "no pipelines registered (no worker is running against this Redis)")
		return nil
	}
	const row = "%-32s  %-20s  %7s  %-9s  %-8s  %-11s  %s\n"
	fmt.Fprintf(a.stdout, row, "ID", "HOST", "PID", "STATUS", "SEEN", "LOG BACKLOG", "TASK QUEUES")
	for _, p := range out {
		host := p.Hostname
		if p.Nickname != "" {
			host = p.Nickname
		}
		fmt.Fprintf(a.stdout, row, p.ID, host, p.PID, p.Status,
			a.now().Sub(p.LastSeen).Round(time.Second).String()+" ago", p.LogOutbox, strings.Join(p.TaskQueues, ","))
		if p.NotClaiming != "" {
			fmt.Fprintf(a.stdout, "  %s: %s\n", p.ID, p.NotClaiming)
		}
	}
	return nil
}
