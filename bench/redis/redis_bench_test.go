// Benchmarks: Redis round trips and time per hook result and per log line
// against a real redis-server. Run:
//
//	go test -run "^$" -bench . -benchtime 3000x ./bench/redis/
//
// Round trips are counted with a go-redis hook (one per command, pipeline
// or transaction sent); bytes are the server's total_net_input_bytes and
// total_net_output_bytes (INFO) over the timed loop, so they include the
// RESP framing and the replies.

package redisbench

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/archiveflow/archiveflow/bench/benchkit"
	"github.com/archiveflow/archiveflow/config"
	"github.com/archiveflow/archiveflow/internal/backend"
	"github.com/archiveflow/archiveflow/internal/ident"
	"github.com/archiveflow/archiveflow/internal/model"
	"github.com/archiveflow/archiveflow/internal/rkeys"
	"github.com/archiveflow/archiveflow/internal/testredis"
)

// counters measure one timed loop: round trips on the client, bytes on the
// server.
type counters struct {
	rt     *benchkit.RoundTrips
	rdb    *redis.Client
	rt0    int64
	stats0 benchkit.RedisStats
}

// start marks the beginning of the timed loop.
func (c *counters) start(b *testing.B) {
	b.Helper()
	st, err := benchkit.ReadRedisStats(context.Background(), c.rdb)
	if err != nil {
		b.Fatal(err)
	}
	c.stats0, c.rt0 = st, c.rt.Load()
}

// report reports round trips and bytes (in, out) per unit.
func (c *counters) report(b *testing.B, units int, unit string) {
	b.Helper()
	rt := c.rt.Load() - c.rt0
	st, err := benchkit.ReadRedisStats(context.Background(), c.rdb)
	if err != nil {
		b.Fatal(err)
	}
	d := st.Sub(c.stats0)
	b.ReportMetric(float64(rt)/float64(units), "roundtrips/"+unit)
	b.ReportMetric(float64(d.NetIn)/float64(units), "bytes-in/"+unit)
	b.ReportMetric(float64(d.NetOut)/float64(units), "bytes-out/"+unit)
	b.ReportMetric(float64(d.Commands)/float64(units), "server-cmds/"+unit)
}

// setup starts a Redis and a Store with the configured defaults.
func setup(b *testing.B) (*rkeys.Store, *counters, string) {
	b.Helper()
	srv := testredis.Start(b)
	if !srv.Real() {
		b.Log("measuring against miniredis: numbers are not representative")
	}
	rdb := srv.Client()
	cnt := &counters{rt: &benchkit.RoundTrips{}, rdb: rdb}
	rdb.AddHook(cnt.rt)
	cfg := config.Default()
	st, err := rkeys.NewStore(rdb, backend.StoreOptions(&cfg), nil)
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
	st, cnt, id := setup(b)
	ctx := context.Background()
	res := model.ArchiveResult{Plugin: "wget", Hook: "on_Snapshot__50_wget.sh", Step: 5, Status: model.StatusSucceeded,
		StartedAt: time.Now(), EndedAt: time.Now(), OutputBytes: 4096}
	resp := []model.Response{{URL: "http://bench.example/", Status: 200, Bytes: 4096}, {URL: "http://bench.example/a.css", Status: 404}}
	// Warm the script cache so the first EVALSHA miss is not counted.
	if _, err := st.RecordResult(ctx, id, "warm", res, resp); err != nil {
		b.Fatal(err)
	}
	cnt.start(b)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if _, err := st.RecordResult(ctx, id, fmt.Sprintf("op-%d", i), res, resp); err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	cnt.report(b, b.N, "result")
}

func BenchmarkAppendLog(b *testing.B) {
	for _, batch := range []int{1, 16, 64, 256} {
		b.Run(fmt.Sprintf("batch=%d", batch), func(b *testing.B) {
			st, cnt, id := setup(b)
			ctx := context.Background()
			packets := make([]rkeys.Packet, batch)
			for i := range packets {
				packets[i] = rkeys.Stdout(time.Now(), fmt.Sprintf("wget: saved http://bench.example/page/%d [12345 bytes]", i))
			}
			if _, err := st.AppendLog(ctx, id, "warm", packets); err != nil {
				b.Fatal(err)
			}
			cnt.start(b)
			b.ResetTimer()
			lines := 0
			for lines < b.N {
				if _, err := st.AppendLog(ctx, id, fmt.Sprintf("b-%d", lines), packets); err != nil {
					b.Fatal(err)
				}
				lines += batch
			}
			b.StopTimer()
			cnt.report(b, lines, "line")
		})
	}
}
