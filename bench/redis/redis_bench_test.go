// Benchmarks: Redis round trips and time per hook result and per log line
// against a real redis-server. Run:
//
//	go test -run "^$" -bench . -benchtime 3000x ./bench/redis/
//
// Round trips are counted with a go-redis hook (one per command, pipeline
// or transaction sent).

package redisbench

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/archiveflow/archiveflow/internal/ident"
	"github.com/archiveflow/archiveflow/internal/model"
	"github.com/archiveflow/archiveflow/internal/rkeys"
	"github.com/archiveflow/archiveflow/internal/testredis"
)

// rttCounter counts network round trips.
type rttCounter struct{ n atomic.Int64 }

func (c *rttCounter) DialHook(next redis.DialHook) redis.DialHook { return next }

func (c *rttCounter) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		c.n.Add(1)
		return next(ctx, cmd)
	}
}

func (c *rttCounter) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		c.n.Add(1)
		return next(ctx, cmds)
	}
}

func setup(b *testing.B, opts rkeys.Options) (*rkeys.Store, *rttCounter, string) {
	b.Helper()
	srv := testredis.Start(b)
	if !srv.Real() {
		b.Log("measuring against miniredis: numbers are not representative")
	}
	rdb := srv.Client()
	cnt := &rttCounter{}
	rdb.AddHook(cnt)
	st, err := rkeys.NewStore(rdb, opts, nil)
	if err != nil {
		b.Fatal(err)
	}
	id, norm, err := ident.FromURL("http://bench.example/")
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	if err := st.CreateJob(ctx, rkeys.Job{Ident: id, URL: norm, FetchDepth: "shallow", WorkflowID: "bench"}); err != nil {
		b.Fatal(err)
	}
	return st, cnt, id
}

func BenchmarkRecordResult(b *testing.B) {
	st, cnt, id := setup(b, rkeys.Options{})
	ctx := context.Background()
	res := model.ArchiveResult{Plugin: "wget", Hook: "on_Snapshot__50_wget.sh", Step: 5, Status: model.StatusSucceeded,
		StartedAt: time.Now(), EndedAt: time.Now(), OutputBytes: 4096}
	resp := []model.Response{{URL: "http://bench.example/", Status: 200, Bytes: 4096}, {URL: "http://bench.example/a.css", Status: 404}}
	// Warm the script cache so the first EVALSHA miss is not counted.
	if _, err := st.RecordResult(ctx, id, "warm", res, resp); err != nil {
		b.Fatal(err)
	}
	cnt.n.Store(0)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if _, err := st.RecordResult(ctx, id, fmt.Sprintf("op-%d", i), res, resp); err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	b.ReportMetric(float64(cnt.n.Load())/float64(b.N), "roundtrips/result")
}

func BenchmarkAppendLog(b *testing.B) {
	for _, batch := range []int{1, 16, 64, 256} {
		b.Run(fmt.Sprintf("batch=%d", batch), func(b *testing.B) {
			st, cnt, id := setup(b, rkeys.Options{})
			ctx := context.Background()
			packets := make([]rkeys.Packet, batch)
			for i := range packets {
				packets[i] = rkeys.Stdout(time.Now(), fmt.Sprintf("wget: saved http://bench.example/page/%d [12345 bytes]", i))
			}
			if _, err := st.AppendLog(ctx, id, "warm", packets); err != nil {
				b.Fatal(err)
			}
			cnt.n.Store(0)
			b.ResetTimer()
			lines := 0
			for lines < b.N {
				if _, err := st.AppendLog(ctx, id, fmt.Sprintf("b-%d", lines), packets); err != nil {
					b.Fatal(err)
				}
				lines += batch
			}
			b.StopTimer()
			b.ReportMetric(float64(cnt.n.Load())/float64(lines), "roundtrips/line")
		})
	}
}
