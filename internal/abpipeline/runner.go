package abpipeline

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"go.temporal.io/api/serviceerror"
	"go.temporal.io/sdk/client"

	"github.com/archiveflow/archiveflow/config"
	"github.com/archiveflow/archiveflow/internal/jobctl"
	"github.com/archiveflow/archiveflow/internal/model"
	"github.com/archiveflow/archiveflow/internal/rkeys"
	"github.com/archiveflow/archiveflow/internal/submit"
	"github.com/archiveflow/archiveflow/workflows"
)

// Runner starts and steers the workflows of claimed jobs (one workflow per
// job, workflow ID = ident).
type Runner interface {
	// Start starts the job's workflow; ErrAlreadyRunning when a workflow
	// with the ident runs already (Temporal refused a second one).
	Start(ctx context.Context, j Job) (Run, error)
	// Running reports whether a workflow with the ident is running.
	Running(ctx context.Context, ident string) (bool, error)
	// Abort sends the workflow's abort signal.
	Abort(ctx context.Context, ident, reason string) error
	// Settings returns the workflow's current settings.
	Settings(ctx context.Context, ident string) (model.Settings, error)
	// SetSettings sends the set_settings update with the given update id
	// (Temporal applies one update id once) and waits until it is applied.
	SetSettings(ctx context.Context, ident, updateID string, s model.Settings) error
}

// Run is a started workflow; Get returns when it has ended.
type Run interface {
	Get(ctx context.Context, valuePtr any) error
}

// Typed errors of Runner.
var (
	// ErrAlreadyRunning: a workflow with the job's ident runs already.
	ErrAlreadyRunning = errors.New("a workflow with this ident is already running")
)

// TemporalRunner is the Runner on a Temporal client, building workflow
// inputs with internal/submit from the configuration and the pool: a
// fetch_depth inf job or a URL-list job is a CrawlWorkflow, a shallow one
// a SnapshotWorkflow.
// Both take the same abort signal and set_settings update.
type TemporalRunner struct {
	Config *config.Config
	Client client.Client
	Pool   config.Pool
}

var _ Runner = (*TemporalRunner)(nil)

// Request is the submit request of a bot job on pool. A fetch_depth inf
// job (`!a`) is a crawl without a depth limit and without rules, as
// ArchiveBot's recursive jobs are; its ignores are the bot's. A URL-list
// job (`!a <` / `!ao <`, url_file set) is a crawl from every listed URL,
// recursive or (shallow) of depth 0. robots.txt is ignored, as ArchiveBot
// does, whatever config crawl.robots says. The job's nice (0 unless set
// while it waited) is its workflow's priority.
func Request(j Job, pool config.Pool) submit.Request {
	return submit.Request{
		Ident: j.Ident, URL: j.URL, FetchDepth: j.FetchDepth, Pool: pool, Settings: j.Settings,
		StartedBy: j.StartedBy, StartedIn: j.StartedIn, CrawlDepth: -1, URLList: j.URLFile,
		Robots: model.RobotsIgnore, Nice: j.Nice, PriorityKey: model.PriorityKey(j.Nice),
	}
}

// request is the submit request of j on the runner's pool: a job claimed
// from a named queue (pending:NAME) is tagged NamedTag, so only pipelines
// of this nickname run its work.
func (r *TemporalRunner) request(j Job) submit.Request {
	req := Request(j, r.Pool)
	if strings.HasPrefix(j.Queue, rkeys.NamedQueuePrefix) {
		req.Tag = NamedTag(r.Config, r.Pool)
	}
	return req
}

// Start implements Runner.
func (r *TemporalRunner) Start(ctx context.Context, j Job) (Run, error) {
	req := r.request(j)
	workflow, in, err := submit.Workflow(r.Config, req)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrBadJob, err)
	}
	run, err := r.Client.ExecuteWorkflow(ctx, submit.StartOptions(req), workflow, in)
	var started *serviceerror.WorkflowExecutionAlreadyStarted
	if errors.As(err, &started) {
		return nil, fmt.Errorf("start workflow %s: %w", j.Ident, ErrAlreadyRunning)
	}
	if err != nil {
		return nil, fmt.Errorf("start workflow %s: %w", j.Ident, err)
	}
	return run, nil
}

// Running implements Runner.
func (r *TemporalRunner) Running(ctx context.Context, ident string) (bool, error) {
	d, err := r.Client.DescribeWorkflowExecution(ctx, ident, "")
	var nf *serviceerror.NotFound
	if errors.As(err, &nf) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("describe workflow %s: %w", ident, err)
	}
	return d.GetWorkflowExecutionInfo().GetCloseTime() == nil, nil
}

// Abort implements Runner.
func (r *TemporalRunner) Abort(ctx context.Context, ident, reason string) error {
	return jobctl.Abort(ctx, r.Client, ident, workflows.AbortRequest{Reason: reason, By: "ArchiveBot"})
}

// Settings implements Runner. The status of a snapshot (workflows.Status)
// and of a crawl (workflows.CrawlStatus) both carry the settings under
// "settings"; only that field is read.
func (r *TemporalRunner) Settings(ctx context.Context, ident string) (model.Settings, error) {
	var st struct {
		Settings model.Settings `json:"settings"`
	}
	if err := jobctl.Status(ctx, r.Client, ident, &st); err != nil {
		return model.Settings{}, err
	}
	return st.Settings, nil
}

// SetSettings implements Runner.
func (r *TemporalRunner) SetSettings(ctx context.Context, ident, updateID string, s model.Settings) error {
	_, err := jobctl.SetSettings(ctx, r.Client, ident, updateID, s)
	return err
}
