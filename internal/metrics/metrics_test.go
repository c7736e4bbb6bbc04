package metrics

import (
	"context"
	"errors"
	"net/http/httptest"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/archiveflow/archiveflow/internal/metrics/metricstest"
	"github.com/archiveflow/archiveflow/internal/model"
	"github.com/archiveflow/archiveflow/internal/testredis"
)

func TestHooksAreCountedByPluginAndStatus(t *testing.T) {
	started := testutil.ToFloat64(hooksStarted.WithLabelValues("t-wget"))
	ok := testutil.ToFloat64(hooksFinished.WithLabelValues("t-wget", "succeeded"))
	HookStarted("t-wget")
	HookStarted("t-wget")
	HookFinished("t-wget", string(model.StatusSucceeded), 2*time.Second)
	HookFinished("t-wget", HookTransient, time.Second)

	assert.Equal(t, started+2, testutil.ToFloat64(hooksStarted.WithLabelValues("t-wget")))
	assert.Equal(t, ok+1, testutil.ToFloat64(hooksFinished.WithLabelValues("t-wget", "succeeded")))
	assert.Equal(t, 1.0, testutil.ToFloat64(hooksFinished.WithLabelValues("t-wget", HookTransient)))
	fams := gather(t)
	assert.Equal(t, 2.0, fams.Sum("archiveflow_hook_duration_seconds", "plugin", "t-wget"), "one duration per finished attempt")
}

func TestFetchesAreCountedByKindClassAndBytes(t *testing.T) {
	before := gather(t)
	Fetched(FetchPage, model.ResponseCounts{Count: 9, R1xx: 1, R2xx: 3, R3xx: 1, R4xx: 2, R5xx: 1, Runk: 1, Errors: 4, Bytes: 1234})
	Fetched(FetchRequisite, model.ResponseCounts{Count: 1, R2xx: 1, Bytes: 100})
	Fetched(FetchPage, model.ResponseCounts{})
	after := gather(t)
	want := map[string]float64{"1xx": 1, "2xx": 3, "3xx": 1, "4xx": 2, "5xx": 1, "unknown": 1, "error": 4}
	for class, n := range want {
		assert.Equal(t, n, after.Sum("archiveflow_crawl_fetches_total", "kind", "page", "class", class)-
			before.Sum("archiveflow_crawl_fetches_total", "kind", "page", "class", class), class)
	}
	assert.Equal(t, 1.0, after.Sum("archiveflow_crawl_fetches_total", "kind", "requisite", "class", "2xx")-
		before.Sum("archiveflow_crawl_fetches_total", "kind", "requisite", "class", "2xx"))
	assert.ElementsMatch(t, fetchClasses, keys(after.ByLabel("archiveflow_crawl_fetches_total", "class")), "every class, no other")
	assert.ElementsMatch(t, []string{"page", "requisite"}, keys(after.ByLabel("archiveflow_crawl_fetches_total", "kind")))
	assert.Equal(t, 1234.0, after.Sum("archiveflow_crawl_fetched_bytes_total", "kind", "page")-before.Sum("archiveflow_crawl_fetched_bytes_total", "kind", "page"))
	assert.Equal(t, 100.0, after.Sum("archiveflow_crawl_fetched_bytes_total", "kind", "requisite")-before.Sum("archiveflow_crawl_fetched_bytes_total", "kind", "requisite"))
}

func TestRateLimitReasonsStayBounded(t *testing.T) {
	before := gather(t)
	RateLimitBackoff(Backoff429, 3*time.Second)
	RateLimitBackoff("https://example.com/", time.Second) // never a label value
	HostBudgetWait(100 * time.Millisecond)
	after := gather(t)
	got := after.ByLabel("archiveflow_rate_limit_backoffs_total", "reason")
	assert.ElementsMatch(t, []string{"429", "503", "marker", "other"}, keys(got))
	assert.Equal(t, 1.0, got["429"]-before.ByLabel("archiveflow_rate_limit_backoffs_total", "reason")["429"])
	assert.Equal(t, 1.0, got["other"]-before.ByLabel("archiveflow_rate_limit_backoffs_total", "reason")["other"])
	assert.Equal(t, 2.0, after.Sum("archiveflow_rate_limit_backoff_seconds")-before.Sum("archiveflow_rate_limit_backoff_seconds"))
	assert.Equal(t, 1.0, after.Sum("archiveflow_host_budget_wait_seconds")-before.Sum("archiveflow_host_budget_wait_seconds"))
}

func TestScrapeTimeSources(t *testing.T) {
	fams := gather(t)
	assert.NotContains(t, fams, "archiveflow_frontier_pages", "no source, no gauge")

	unsetF := SetFrontierSource(func(context.Context) (FrontierSizes, error) {
		return FrontierSizes{Pages: map[string]int64{"ready": 5, "claimed": 2, "succeeded": 7}, Crawls: 2}, nil
	})
	unsetB := SetBacklogSource(func() (Backlog, error) { return Backlog{Pending: 3, Rejected: 1}, nil })
	fams = gather(t)
	assert.Equal(t, map[string]float64{"ready": 5, "claimed": 2, "succeeded": 7}, fams.ByLabel("archiveflow_frontier_pages", "state"))
	assert.Equal(t, 2.0, fams.Sum("archiveflow_frontier_crawls"))
	assert.Equal(t, map[string]float64{"pending": 3, "rejected": 1}, fams.ByLabel("archiveflow_log_outbox_items", "state"))

	// A later source replaces the first; unsetting the first keeps it.
	unsetB2 := SetBacklogSource(func() (Backlog, error) { return Backlog{Pending: 8}, nil })
	unsetB()
	assert.Equal(t, 8.0, gather(t).Sum("archiveflow_log_outbox_items", "state", "pending"))
	unsetB2()
	unsetF()
	fams = gather(t)
	assert.NotContains(t, fams, "archiveflow_log_outbox_items")
	assert.NotContains(t, fams, "archiveflow_frontier_pages")
}

func TestFailingSourceLeavesTheOthersServed(t *testing.T) {
	defer SetFrontierSource(func(context.Context) (FrontierSizes, error) { return FrontierSizes{}, errors.New("redis down") })()
	defer SetBacklogSource(func() (Backlog, error) { return Backlog{Pending: 4}, nil })()
	srv, err := Serve("127.0.0.1:0", nil)
	require.NoError(t, err)
	defer srv.Close()
	fams, err := metricstest.Scrape(context.Background(), "http://"+srv.Addr().String()+"/metrics")
	require.NoError(t, err)
	assert.NotContains(t, fams, "archiveflow_frontier_pages")
	assert.Equal(t, 4.0, fams.Sum("archiveflow_log_outbox_items", "state", "pending"))
	assert.Contains(t, fams, "archiveflow_hooks_started_total")
}

// TestServedMetricsFollowTheConventions: what /metrics serves parses with
// Prometheus' parser and passes its linter; every metric of ours is
// prefixed and listed in docs/operations.md.
func TestServedMetricsFollowTheConventions(t *testing.T) {
	defer SetFrontierSource(func(context.Context) (FrontierSizes, error) {
		return FrontierSizes{Pages: map[string]int64{"ready": 1}, Crawls: 1}, nil
	})()
	defer SetBacklogSource(func() (Backlog, error) { return Backlog{}, nil })()
	HookStarted("t-lint")
	HookFinished("t-lint", HookError, time.Millisecond)
	temporalErrors.WithLabelValues("T", "Unavailable")
	redisErrors.WithLabelValues("t", "io")
	problems, err := testutil.GatherAndLint(registry)
	require.NoError(t, err)
	assert.Empty(t, problems)

	srv, err := Serve("127.0.0.1:0", nil)
	require.NoError(t, err)
	defer srv.Close()
	fams, err := metricstest.Scrape(context.Background(), "http://"+srv.Addr().String()+"/metrics")
	require.NoError(t, err)
	doc := readDoc(t)
	ours := 0
	for name := range fams {
		if !strings.HasPrefix(name, "archiveflow_") {
			assert.True(t, strings.HasPrefix(name, "go_") || strings.HasPrefix(name, "process_") || strings.HasPrefix(name, "promhttp_"), name)
			continue
		}
		ours++
		assert.True(t, strings.Contains(doc, "`"+name+"`"), "docs/operations.md lists %s", name)
	}
	assert.GreaterOrEqual(t, ours, 12)
}

func TestRedisErrorsAreCounted(t *testing.T) {
	rdb := testredis.Start(t).Client()
	rdb.AddHook(RedisHook())
	ctx := context.Background()
	io := func() float64 { return testutil.ToFloat64(redisErrors.WithLabelValues("incr", "reply")) }
	before := io()
	require.NoError(t, rdb.Set(ctx, "k", "text", 0).Err())
	require.Error(t, rdb.Incr(ctx, "k").Err(), "INCR on text is a Redis error")
	assert.Equal(t, before+1, io())

	require.ErrorIs(t, rdb.Get(ctx, "missing").Err(), redis.Nil)
	assert.Equal(t, 0.0, testutil.ToFloat64(redisErrors.WithLabelValues("get", "reply")), "a missing key is no error")

	pipe := rdb.Pipeline()
	pipe.Incr(ctx, "k")
	pipe.Get(ctx, "missing")
	_, err := pipe.Exec(ctx)
	require.Error(t, err)
	assert.Equal(t, before+2, io(), "a pipeline's failed command counts")

	// A script not yet cached is retried with EVAL: not an error.
	s := redis.NewScript("return 1")
	require.NoError(t, s.Run(ctx, rdb, nil).Err())
	assert.Equal(t, 0.0, testutil.ToFloat64(redisErrors.WithLabelValues("evalsha", "reply")))

	cctx, cancel := context.WithCancel(ctx)
	cancel()
	require.Error(t, rdb.Ping(cctx).Err())
	assert.Equal(t, 1.0, testutil.ToFloat64(redisErrors.WithLabelValues("ping", "io")), "a call that got no answer")
}

func TestTemporalErrorsAreCountedByMethodAndCode(t *testing.T) {
	const method = "/temporal.api.workflowservice.v1.WorkflowService/TPollActivityTaskQueue"
	failing := func(context.Context, string, any, any, *grpc.ClientConn, ...grpc.CallOption) error {
		return status.Error(codes.Unavailable, "connection refused")
	}
	ok := func(context.Context, string, any, any, *grpc.ClientConn, ...grpc.CallOption) error { return nil }
	require.Error(t, TemporalInterceptor(context.Background(), method, nil, nil, nil, failing))
	require.NoError(t, TemporalInterceptor(context.Background(), method, nil, nil, nil, ok))
	assert.Equal(t, 1.0, testutil.ToFloat64(temporalErrors.WithLabelValues("TPollActivityTaskQueue", "Unavailable")))
	assert.Equal(t, 0.0, testutil.ToFloat64(temporalErrors.WithLabelValues("TPollActivityTaskQueue", "OK")))
}

func TestServeNamesTheKeyWhenTheAddressIsTaken(t *testing.T) {
	srv, err := Serve("127.0.0.1:0", nil)
	require.NoError(t, err)
	defer srv.Close()
	_, err = Serve(srv.Addr().String(), nil)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "metrics.listen")
}

func gather(t *testing.T) metricstest.Families {
	t.Helper()
	srv := httptest.NewServer(Handler())
	defer srv.Close()
	fams, err := metricstest.Scrape(context.Background(), srv.URL)
	require.NoError(t, err)
	return fams
}

func keys(m map[string]float64) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return out
}

func readDoc(t *testing.T) string {
	t.Helper()
	b, err := os.ReadFile("../../docs/operations.md")
	require.NoError(t, err, "read docs/operations.md")
	return string(b)
}
