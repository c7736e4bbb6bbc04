package redisbench

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/archiveflow/archiveflow/config"
	"github.com/archiveflow/archiveflow/internal/fleethealth"
	"github.com/archiveflow/archiveflow/internal/model"
)

// BenchmarkFleetHealth: what one final hook outcome adds for the fleet's
// health (internal/fleethealth: a host × plugin and a job × hook check in
// Flapjack's layout): round trips and bytes on the wire per outcome, and
// the Redis memory a state change keeps (MEMORY USAGE of the host check's
// keys per retained change). "steady": every outcome ok, no state change;
// "flapping": every outcome changes both checks' state (critical_after 1),
// each a history entry and a notification; both a second apart. "crawl":
// steady at 1,000 outcomes a second, as a crawl's page hooks end.
func BenchmarkFleetHealth(b *testing.B) {
	for _, c := range []struct {
		name      string
		flap      bool
		perSecond int // outcomes a second
	}{{"steady", false, 1}, {"flapping", true, 1}, {"crawl", false, 1000}} {
		flap := c.flap
		b.Run(c.name, func(b *testing.B) {
			st, cnt, id := setup(b)
			ctx := context.Background()
			cfg := config.Default()
			cfg.Flapjack.CriticalAfter = 1
			h, err := fleethealth.FromConfig(st, &cfg)
			if err != nil {
				b.Fatal(err)
			}
			at := time.Now()
			outcome := func(i int, op string) {
				res := model.ArchiveResult{Plugin: "wget", Hook: "on_Snapshot__50_wget.sh", Step: 5, Status: model.StatusSucceeded,
					StartedAt: at, EndedAt: at.Add(time.Duration(i/c.perSecond) * time.Second)} // flapping: one history entry each
				if flap && i%2 == 1 {
					res.Status, res.ExitCode, res.Error = model.StatusFailed, 4, "wget: network failure"
				}
				if _, err := h.Record(ctx, fleethealth.Outcome{Host: "host-a", Ident: id, OpID: op, Result: res}); err != nil {
					b.Fatal(err)
				}
			}
			outcome(0, "warm") // the script cache and the checks exist
			cnt.start(b)
			b.ResetTimer()
			for i := 1; i <= b.N; i++ {
				outcome(i, fmt.Sprintf("op-%d", i))
			}
			b.StopTimer()
			cnt.report(b, b.N, "outcome")
			changes, err := cnt.rdb.LLen(ctx, "host-a:wget:states").Result()
			if err != nil {
				b.Fatal(err)
			}
			keys, err := cnt.rdb.Keys(ctx, "host-a:wget:*").Result()
			if err != nil {
				b.Fatal(err)
			}
			var mem int64
			for _, k := range append(keys, "check:host-a:wget") {
				n, err := cnt.rdb.MemoryUsage(ctx, k).Result()
				if err != nil {
					b.Fatal(err)
				}
				mem += n
			}
			b.ReportMetric(float64(changes), "history-entries")
			b.ReportMetric(float64(mem)/float64(changes), "mem-bytes/retained-change")
		})
	}
}
