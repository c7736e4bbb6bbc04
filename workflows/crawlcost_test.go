package workflows_test

import (
	"encoding/json"
	"sync/atomic"

	"go.temporal.io/sdk/interceptor"
	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"
)

// runCost is what makes a CrawlWorkflow run's workflow tasks cost what
// they do, counted (not timed): the SDK's dispatcher runs every live
// coroutine at every workflow task, and what a run is handed on carries
// into every task of the next.
type runCost struct {
	// inputBytes is the run's input, JSON-encoded: a continue-as-new's
	// carried state.
	inputBytes int
	// maxLive is the most coroutines the run started (workflow.Go) alive
	// at once.
	maxLive int
	live    atomic.Int64
}

// costInterceptor counts each CrawlWorkflow run's runCost, in run order.
type costInterceptor struct {
	interceptor.WorkerInterceptorBase
	runs []*runCost
}

// install counts the runs of env's workflow too.
func (ci *costInterceptor) install(env *crawlEnv) {
	env.SetWorkerOptions(worker.Options{Interceptors: []interceptor.WorkerInterceptor{ci}})
}

func (ci *costInterceptor) InterceptWorkflow(ctx workflow.Context, next interceptor.WorkflowInboundInterceptor) interceptor.WorkflowInboundInterceptor {
	if workflow.GetInfo(ctx).WorkflowType.Name != "CrawlWorkflow" {
		return next
	}
	rc := &runCost{}
	ci.runs = append(ci.runs, rc)
	return &costInbound{WorkflowInboundInterceptorBase: interceptor.WorkflowInboundInterceptorBase{Next: next}, rc: rc}
}

type costInbound struct {
	interceptor.WorkflowInboundInterceptorBase
	rc *runCost
}

func (i *costInbound) Init(outbound interceptor.WorkflowOutboundInterceptor) error {
	return i.Next.Init(&costOutbound{WorkflowOutboundInterceptorBase: interceptor.WorkflowOutboundInterceptorBase{Next: outbound}, rc: i.rc})
}

func (i *costInbound) ExecuteWorkflow(ctx workflow.Context, in *interceptor.ExecuteWorkflowInput) (any, error) {
	if b, err := json.Marshal(in.Args); err == nil {
		i.rc.inputBytes = len(b)
	}
	return i.Next.ExecuteWorkflow(ctx, in)
}

type costOutbound struct {
	interceptor.WorkflowOutboundInterceptorBase
	rc *runCost
}

func (o *costOutbound) Go(ctx workflow.Context, name string, f func(ctx workflow.Context)) workflow.Context {
	o.rc.maxLive = max(o.rc.maxLive, int(o.rc.live.Add(1)))
	return o.Next.Go(ctx, name, func(ctx workflow.Context) {
		defer o.rc.live.Add(-1)
		f(ctx)
	})
}
