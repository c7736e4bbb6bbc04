package devserver

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/operatorservice/v1"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/client"
	sdklog "go.temporal.io/sdk/log"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"

	"github.com/archiveflow/archiveflow/internal/searchattr"
)

// startTimeout is generous: a loaded 2-core CI machine can be slow.
const startTimeout = 2 * time.Minute

// startServer starts a dev server and stops it when the test ends.
func startServer(t testing.TB, opts Options) *Server {
	t.Helper()
	if opts.Log == nil {
		opts.Log = testLogger(t)
	}
	ctx, cancel := context.WithTimeout(context.Background(), startTimeout)
	defer cancel()
	s, err := Start(ctx, opts)
	require.NoError(t, err)
	t.Cleanup(func() { assert.NoError(t, s.Stop()) })
	return s
}

// newClient returns an SDK client for the server's namespace; the caller
// closes it.
func newClient(t testing.TB, s *Server) client.Client {
	t.Helper()
	c, err := client.Dial(client.Options{
		HostPort:  s.HostPort(),
		Namespace: s.Namespace(),
		Logger:    sdklog.NewStructuredLogger(slog.New(slog.DiscardHandler)),
	})
	require.NoError(t, err)
	return c
}

// dial returns an SDK client that is closed when the test ends.
func dial(t testing.TB, s *Server) client.Client {
	t.Helper()
	c := newClient(t, s)
	t.Cleanup(c.Close)
	return c
}

// greet is the test activity.
func greet(_ context.Context, name string) (string, error) {
	return "hello " + name, nil
}

// greetWorkflow records the ident and step as search attributes, runs
// greet once and returns its result.
func greetWorkflow(ctx workflow.Context, ident string) (string, error) {
	if err := workflow.UpsertTypedSearchAttributes(ctx,
		searchattr.Ident.ValueSet(ident),
		searchattr.Step.ValueSet(3),
	); err != nil {
		return "", fmt.Errorf("upsert search attributes: %w", err)
	}
	ctx = workflow.WithActivityOptions(ctx, workflow.ActivityOptions{
		StartToCloseTimeout: time.Minute,
		RetryPolicy:         &temporal.RetryPolicy{MaximumAttempts: 3},
	})
	var out string
	err := workflow.ExecuteActivity(ctx, "greet", ident).Get(ctx, &out)
	return out, err
}

// waitThenGreetWorkflow waits for the "go" signal, then greets: a job
// that is mid-flight while the test restarts the server.
func waitThenGreetWorkflow(ctx workflow.Context, name string) (string, error) {
	workflow.GetSignalChannel(ctx, "go").Receive(ctx, nil)
	ctx = workflow.WithActivityOptions(ctx, workflow.ActivityOptions{StartToCloseTimeout: time.Minute})
	var out string
	err := workflow.ExecuteActivity(ctx, "greet", name).Get(ctx, &out)
	return out, err
}

// startWorker starts a worker for the test workflows on a task queue and
// returns its stop function.
func startWorker(t testing.TB, c client.Client, queue string) func() {
	t.Helper()
	w := worker.New(c, queue, worker.Options{})
	w.RegisterWorkflowWithOptions(greetWorkflow, workflow.RegisterOptions{Name: "greet-workflow"})
	w.RegisterWorkflowWithOptions(waitThenGreetWorkflow, workflow.RegisterOptions{Name: "wait-then-greet"})
	w.RegisterActivityWithOptions(greet, activity.RegisterOptions{Name: "greet"})
	require.NoError(t, w.Start())
	return w.Stop
}

// runWorker runs a worker until the test ends.
func runWorker(t testing.TB, c client.Client, queue string) {
	t.Helper()
	t.Cleanup(startWorker(t, c, queue))
}

// runGreeting runs greetWorkflow to completion and returns its run.
func runGreeting(t testing.TB, c client.Client, queue, id string) client.WorkflowRun {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	run, err := c.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: id, TaskQueue: queue}, "greet-workflow", id)
	require.NoError(t, err)
	var out string
	require.NoError(t, run.Get(ctx, &out))
	require.Equal(t, "hello "+id, out)
	return run
}

// historyEvents returns the event types of a workflow's history.
func historyEvents(t testing.TB, c client.Client, id, runID string) []enumspb.EventType {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var types []enumspb.EventType
	it := c.GetWorkflowHistory(ctx, id, runID, false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	for it.HasNext() {
		ev, err := it.Next()
		require.NoError(t, err)
		types = append(types, ev.GetEventType())
	}
	return types
}

func listCustomSearchAttributes(t testing.TB, c client.Client, namespace string) map[string]enumspb.IndexedValueType {
	t.Helper()
	resp, err := c.OperatorService().ListSearchAttributes(context.Background(),
		&operatorservice.ListSearchAttributesRequest{Namespace: namespace})
	require.NoError(t, err)
	return resp.GetCustomAttributes()
}

func TestInMemoryServerRunsWorkflowEndToEnd(t *testing.T) {
	s := startServer(t, Options{Namespace: "archiveflow-test"})
	assert.Equal(t, "archiveflow-test", s.Namespace())
	assert.Empty(t, s.DataDir())
	assert.True(t, strings.HasPrefix(s.HostPort(), "127.0.0.1:"), s.HostPort())
	assert.True(t, strings.HasPrefix(s.UIURL(), "http://127.0.0.1:"), s.UIURL())

	c := dial(t, s)

	t.Run("namespace exists", func(t *testing.T) {
		resp, err := c.WorkflowService().DescribeNamespace(context.Background(),
			&workflowservice.DescribeNamespaceRequest{Namespace: s.Namespace()})
		require.NoError(t, err)
		assert.Equal(t, enumspb.NAMESPACE_STATE_REGISTERED, resp.GetNamespaceInfo().GetState())
	})

	t.Run("every archiveflow search attribute is registered with its type", func(t *testing.T) {
		got := listCustomSearchAttributes(t, c, s.Namespace())
		for _, d := range searchattr.All {
			assert.Equal(t, d.Type, got[d.Name], d.Name)
		}
	})

	t.Run("workflow and activity run and are findable by search attribute", func(t *testing.T) {
		runWorker(t, c, "devserver-e2e")
		run := runGreeting(t, c, "devserver-e2e", "e2e-ident")
		events := historyEvents(t, c, "e2e-ident", run.GetRunID())
		assert.Contains(t, events, enumspb.EVENT_TYPE_ACTIVITY_TASK_COMPLETED)
		assert.Equal(t, enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_COMPLETED, events[len(events)-1])

		query := fmt.Sprintf("%s = 'e2e-ident' AND %s = 3", searchattr.NameIdent, searchattr.NameStep)
		require.Eventually(t, func() bool {
			resp, err := c.ListWorkflow(context.Background(), &workflowservice.ListWorkflowExecutionsRequest{
				Namespace: s.Namespace(), Query: query,
			})
			return err == nil && len(resp.GetExecutions()) == 1 &&
				resp.GetExecutions()[0].GetExecution().GetWorkflowId() == "e2e-ident"
		}, 30*time.Second, 20*time.Millisecond, "visibility query %q finds the workflow", query)
	})

	t.Run("web UI answers", func(t *testing.T) {
		resp, err := http.Get(s.UIURL())
		require.NoError(t, err)
		body, err := io.ReadAll(resp.Body)
		require.NoError(t, resp.Body.Close())
		require.NoError(t, err)
		assert.Equal(t, http.StatusOK, resp.StatusCode)
		assert.Contains(t, strings.ToLower(string(body)), "<html")
	})
}

func TestStopClosesFrontendAndUIAndIsIdempotent(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), startTimeout)
	defer cancel()
	s, err := Start(ctx, Options{Log: testLogger(t)})
	require.NoError(t, err)
	hostPort, uiURL := s.HostPort(), s.UIURL()
	uiAddr := strings.TrimPrefix(uiURL, "http://")

	require.NoError(t, s.Stop())
	require.NoError(t, s.Stop(), "second Stop")

	for _, addr := range []string{hostPort, uiAddr} {
		require.Eventually(t, func() bool {
			conn, err := net.DialTimeout("tcp", addr, time.Second)
			if err != nil {
				return true
			}
			_ = conn.Close()
			return false
		}, 30*time.Second, 20*time.Millisecond, "%s still accepts connections after Stop", addr)
	}
}

func TestPersistentServerSurvivesRestartMidJob(t *testing.T) {
	dir := t.TempDir()
	opts := Options{DataDir: dir, UIPort: NoUI, Log: testLogger(t)}
	const queue = "devserver-persist"

	// First life: one finished workflow and one waiting for a signal.
	ctx, cancel := context.WithTimeout(context.Background(), startTimeout)
	defer cancel()
	first, err := Start(ctx, opts)
	require.NoError(t, err)
	assert.Empty(t, first.UIURL(), "UI disabled")
	assert.Equal(t, dir, first.DataDir())
	c := newClient(t, first)
	stopWorker := startWorker(t, c, queue)
	done := runGreeting(t, c, queue, "persisted-ident")
	before := historyEvents(t, c, "persisted-ident", done.GetRunID())
	pending, err := c.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: "mid-job", TaskQueue: queue}, "wait-then-greet", "drill")
	require.NoError(t, err)
	require.Eventually(t, func() bool {
		events := historyEvents(t, c, "mid-job", pending.GetRunID())
		return len(events) > 0 && events[len(events)-1] == enumspb.EVENT_TYPE_WORKFLOW_TASK_COMPLETED
	}, time.Minute, 20*time.Millisecond, "the mid-job workflow reaches its wait")
	stopWorker()
	c.Close()
	require.NoError(t, first.Stop())

	// Second life on the same data dir, on new ports.
	second := startServer(t, opts)
	assert.NotEqual(t, first.HostPort(), second.HostPort())
	c2 := dial(t, second)
	runWorker(t, c2, queue)

	t.Run("finished workflow's history is served unchanged", func(t *testing.T) {
		assert.Equal(t, before, historyEvents(t, c2, "persisted-ident", done.GetRunID()))
		desc, err := c2.DescribeWorkflowExecution(context.Background(), "persisted-ident", "")
		require.NoError(t, err)
		assert.Equal(t, enumspb.WORKFLOW_EXECUTION_STATUS_COMPLETED, desc.GetWorkflowExecutionInfo().GetStatus())
	})

	t.Run("workflow started before the restart finishes after it", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		require.NoError(t, c2.SignalWorkflow(ctx, "mid-job", pending.GetRunID(), "go", nil))
		var out string
		require.NoError(t, c2.GetWorkflow(ctx, "mid-job", pending.GetRunID()).Get(ctx, &out))
		assert.Equal(t, "hello drill", out)
	})

	t.Run("new workflows run", func(t *testing.T) {
		runGreeting(t, c2, queue, "after-restart")
	})

	t.Run("search attributes are still registered", func(t *testing.T) {
		got := listCustomSearchAttributes(t, c2, second.Namespace())
		for _, d := range searchattr.All {
			assert.Equal(t, d.Type, got[d.Name], d.Name)
		}
	})
}

func TestSecondStartOnSameDataDirFails(t *testing.T) {
	dir := t.TempDir()
	first := startServer(t, Options{DataDir: dir, UIPort: NoUI})

	ctx, cancel := context.WithTimeout(context.Background(), startTimeout)
	defer cancel()
	_, err := Start(ctx, Options{DataDir: dir, UIPort: NoUI, Log: testLogger(t)})
	require.ErrorIs(t, err, ErrDataDirInUse)
	assert.Contains(t, err.Error(), dir)

	c := dial(t, first)
	_, err = c.WorkflowService().DescribeNamespace(context.Background(),
		&workflowservice.DescribeNamespaceRequest{Namespace: first.Namespace()})
	assert.NoError(t, err, "the failed second start leaves the first server running")
}

func TestFailedStartReleasesEverything(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer func() { _ = l.Close() }()
	taken := l.Addr().(*net.TCPAddr).Port
	dir := t.TempDir()

	ctx, cancel := context.WithTimeout(context.Background(), startTimeout)
	defer cancel()
	_, err = Start(ctx, Options{DataDir: dir, UIPort: taken, Log: testLogger(t)})
	require.Error(t, err, "the UI port is taken")
	assert.Contains(t, err.Error(), "web UI port "+strconv.Itoa(taken))

	_, err = Start(ctx, Options{DataDir: dir, FrontendPort: taken, Log: testLogger(t)})
	require.Error(t, err, "the frontend port is taken")
	assert.Contains(t, err.Error(), "frontend port "+strconv.Itoa(taken))

	s := startServer(t, Options{DataDir: dir, UIPort: NoUI})
	assert.NotEmpty(t, s.HostPort(), "the data dir was released by the failed starts")
}
