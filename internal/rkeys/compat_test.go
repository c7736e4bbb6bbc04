package rkeys

// Compatibility tests: each helper below re-implements, in Go, the exact
// reads one of ArchiveBot's programs performs (read from ArchiveBot's
// sources: bot/summary.rb, lib/job.rb + bot/job_status_generation.rb,
// cogs/taco_bell/log_analyzer/analyze-logs, cogs/taco_bell/log-firehose,
// dashboard3's Dashboard.hx, pipeline/archivebot/control.py get_settings)
// and asserts they parse what archiveflow writes.

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"strconv"
	"testing"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/archiveflow/archiveflow/internal/abbot"
	"github.com/archiveflow/archiveflow/internal/model"
)

var rubyToI = abbot.RubyToI

// botStatus is ArchiveBot's `!status IDENT` (internal/abbot).
func botStatus(ctx context.Context, t *testing.T, rdb *redis.Client, ident string) string {
	st, err := abbot.Bot{Redis: rdb}.Status(ctx, ident)
	require.NoError(t, err)
	return st
}

// botSummary re-implements bot/summary.rb.
func botSummary(ctx context.Context, rdb *redis.Client) string {
	get := func(k string) string {
		v, err := rdb.Get(ctx, k).Result()
		if err != nil {
			return "0"
		}
		return v
	}
	return fmt.Sprintf("Job status: %s completed, %s aborted, %s failed, %d in progress, %d pending",
		get("jobs_completed"), get("jobs_aborted"), get("jobs_failed"), rdb.LLen(ctx, "working").Val(), rdb.LLen(ctx, "pending").Val())
}

func TestCompatBotStatusAndSummary(t *testing.T) {
	e := newEnv(t, Options{})
	ctx := ctxT(t)
	j := testJob(t, "http://example.com/")
	j.Note = "testing"
	require.NoError(t, e.store.CreateJob(ctx, j))
	assert.Equal(t, "Job "+j.Ident+" <http://example.com/>. Started by alice; reason: testing. In queue.", botStatus(ctx, t, e.rdb, j.Ident))

	require.NoError(t, e.store.SetState(ctx, j.Ident, model.StateActive))
	_, err := e.store.RecordResult(ctx, j.Ident, "op", model.ArchiveResult{Hook: "h", Status: model.StatusSucceeded, OutputBytes: 99},
		[]model.Response{{URL: "http://example.com/", Status: 200, Bytes: 1234000}, {URL: "http://example.com/x", Status: 502, Bytes: 567}})
	require.NoError(t, err)
	assert.Equal(t, "Job "+j.Ident+" <http://example.com/>. Started by alice; reason: testing. In progress. Downloaded 1.23 MB, 1 errors, 0 queued. 2 workers, delay: 250.0, 375.0 ms.",
		botStatus(ctx, t, e.rdb, j.Ident))

	other := testJob(t, "http://other.example/")
	require.NoError(t, e.store.CreateJob(ctx, other))
	assert.Equal(t, "Job status: 0 completed, 0 aborted, 0 failed, 1 in progress, 1 pending", botSummary(ctx, e.rdb))

	require.NoError(t, e.store.Finish(ctx, j.Ident, model.StateFinished))
	st := botStatus(ctx, t, e.rdb, j.Ident)
	assert.Contains(t, st, "Job completed. Eligible for rearchival in 4")
	assert.Regexp(t, `in 4[78]h \d+m \d+s\.$`, st)
	require.NoError(t, e.store.Finish(ctx, other.Ident, model.StateAborted))
	assert.Contains(t, botStatus(ctx, t, e.rdb, other.Ident), "Job aborted.")
	assert.Equal(t, "Job status: 1 completed, 1 aborted, 0 failed, 0 in progress, 0 pending", botSummary(ctx, e.rdb))
}

// analyzeLogs re-implements analyze-logs for one job: it returns the
// increments it would HINCRBY and the new last_analyzed_log_entry.
func analyzeLogs(ctx context.Context, t *testing.T, rdb *redis.Client, ident string) (map[string]int64, string) {
	vals := rdb.HMGet(ctx, ident, "log_key", "last_analyzed_log_entry").Val()
	logKey, _ := vals[0].(string)
	start, _ := vals[1].(string)
	resps, err := rdb.ZRangeByScoreWithScores(ctx, logKey, &redis.ZRangeBy{Min: "(" + start, Max: "+inf"}).Result()
	require.NoError(t, err, "the analyzer's ZRANGEBYSCORE (%s must parse", start)
	c := map[string]int64{}
	for _, r := range resps {
		var obj map[string]any
		require.NoError(t, json.Unmarshal([]byte(r.Member.(string)), &obj))
		if obj["type"] != "download" {
			continue
		}
		isErr, ok := obj["is_error"].(bool)
		require.True(t, ok, "is_error must be a JSON boolean (a string would be truthy in Ruby)")
		if isErr {
			c["error_count"]++
		}
		code, ok := obj["response_code"].(float64)
		require.True(t, ok, "response_code must be a JSON number")
		require.Equal(t, math.Trunc(code), code, "response_code must be an integer")
		switch {
		case code >= 100 && code < 200:
			c["r1xx"]++
		case code >= 200 && code < 300:
			c["r2xx"]++
		case code >= 300 && code < 400:
			c["r3xx"]++
		case code >= 400 && code < 500:
			c["r4xx"]++
		case code >= 500 && code < 600:
			c["r5xx"]++
		default:
			c["runk"]++
		}
	}
	next := start
	if len(resps) > 0 {
		next = strconv.FormatFloat(resps[len(resps)-1].Score, 'f', -1, 64)
	}
	return c, next
}

func TestCompatLogAnalyzerNeverDoubleCounts(t *testing.T) {
	resps := []model.Response{{URL: "http://e.x/", Status: 200}, {URL: "http://e.x/a", Status: 404}, {URL: "http://e.x/b", Status: 500}, {URL: "http://e.x/c"}}
	for _, own := range []bool{true, false} {
		t.Run("own="+strconv.FormatBool(own), func(t *testing.T) {
			e := newEnv(t, Options{OwnResponseCounters: Bool(own)})
			ctx := ctxT(t)
			j := testJob(t, "http://example.com/")
			require.NoError(t, e.store.CreateJob(ctx, j))
			var pk []Packet
			for _, r := range resps {
				pk = append(pk, Download(t0, r))
			}
			pk = append(pk, Stdout(t0, "not a download"))
			_, err := e.store.AppendLog(ctx, j.Ident, "b", pk)
			require.NoError(t, err)
			_, err = e.store.RecordResult(ctx, j.Ident, "op", model.ArchiveResult{Hook: "wget", Status: model.StatusSucceeded}, resps)
			require.NoError(t, err)

			inc, _ := analyzeLogs(ctx, t, e.rdb, j.Ident)
			ours := model.CountResponses(resps)
			h := e.rdb.HGetAll(ctx, j.Ident).Val()
			total := func(field string, analyzer int64) int64 { return rubyToI(h[field]) + analyzer }
			// Whoever owns the counters, the sum of what archiveflow wrote and
			// what the analyzer would add is counted exactly once.
			assert.Equal(t, ours.R2xx, total("r2xx", inc["r2xx"]))
			assert.Equal(t, ours.R4xx, total("r4xx", inc["r4xx"]))
			assert.Equal(t, ours.R5xx, total("r5xx", inc["r5xx"]))
			assert.Equal(t, ours.Runk, total("runk", inc["runk"]))
			assert.Equal(t, ours.Errors, total("error_count", inc["error_count"]))
			if own {
				assert.Empty(t, inc, "the analyzer finds nothing new to count")
			} else {
				assert.EqualValues(t, 3, inc["error_count"], "the analyzer counts the packets' is_error: 404, 500 and no response, as archiveflow does")
			}
		})
	}
}

func TestCompatFirehoseAndDashboard(t *testing.T) {
	e := newEnv(t, Options{})
	ctx := ctxT(t)
	j := testJob(t, "http://example.com/")
	require.NoError(t, e.store.CreateJob(ctx, j))
	require.NoError(t, e.store.SetState(ctx, j.Ident, model.StateActive))
	_, err := e.store.AppendLog(ctx, j.Ident, "b", []Packet{
		Stdout(t0, "hello"), Download(t0, model.Response{URL: "http://example.com/", Status: 200}), Packet{Type: PacketIgnore, TS: t0, URL: "http://example.com/x.css", Pattern: `\.css$`, Source: "accept_url"},
	})
	require.NoError(t, err)

	// log-firehose: HGETALL, read entries after last_broadcasted_log_entry,
	// merge job_data into each packet, then HSET the bookmark.
	job := e.rdb.HGetAll(ctx, j.Ident).Val()
	entries, err := e.rdb.ZRangeByScoreWithScores(ctx, job["log_key"], &redis.ZRangeBy{Min: "(" + job["last_broadcasted_log_entry"], Max: "+inf"}).Result()
	require.NoError(t, err)
	require.Len(t, entries, 3)
	for _, en := range entries {
		var obj map[string]any
		require.NoError(t, json.Unmarshal([]byte(en.Member.(string)), &obj))
		jd := map[string]any{"ident": j.Ident}
		for k, v := range job {
			jd[k] = v
		}
		obj["job_data"] = jd
		out, err := json.Marshal(obj)
		require.NoError(t, err)

		// Dashboard3 consumeLogEvent: parseInt on job_data fields and ts.
		var ev map[string]any
		require.NoError(t, json.Unmarshal(out, &ev))
		data := ev["job_data"].(map[string]any)
		for _, f := range []string{"bytes_downloaded", "concurrency", "delay_max", "delay_min", "error_count", "items_downloaded",
			"items_queued", "queued_at", "r1xx", "r2xx", "r3xx", "r4xx", "r5xx", "runk", "started_at"} {
			s, ok := data[f].(string)
			require.True(t, ok, "job_data.%s present", f)
			_, err := strconv.ParseFloat(s, 64)
			require.NoError(t, err, "job_data.%s = %q must parse as a number", f, s)
		}
		ts, ok := ev["ts"].(float64)
		require.True(t, ok, "ts must be a JSON number")
		assert.InDelta(t, float64(t0.Unix()), ts, 1)
		switch ev["type"] {
		case "stdout":
			assert.IsType(t, "", ev["message"])
		case "download":
			assert.IsType(t, float64(0), ev["response_code"])
			assert.IsType(t, "", ev["wget_code"])
			assert.IsType(t, true, ev["is_error"])
			assert.IsType(t, true, ev["is_warning"])
		case "ignore":
			assert.IsType(t, "", ev["pattern"])
			assert.IsType(t, "", ev["url"])
		default:
			t.Fatalf("unexpected packet type %v", ev["type"])
		}
	}
}

func TestCompatPipelineSettingsRead(t *testing.T) {
	// pipeline/archivebot/control.py get_settings + wpull settings int().
	e := newEnv(t, Options{})
	ctx := ctxT(t)
	j := testJob(t, "http://example.com/")
	require.NoError(t, e.store.CreateJob(ctx, j))
	_, err := e.store.SetSettings(ctx, j.Ident, model.Settings{Concurrency: 3, DelayMinMS: 10, DelayMaxMS: 20, Ignores: []string{"p"}})
	require.NoError(t, err)
	vals := e.rdb.HMGet(ctx, j.Ident, "delay_min", "delay_max", "concurrency", "settings_age", "abort_requested", "suppress_ignore_reports", "ignore_patterns_set_key").Val()
	for i, want := range []int64{10, 20, 3, 1} {
		n, err := strconv.ParseInt(vals[i].(string), 10, 64)
		require.NoError(t, err, "Python int() of field %d", i)
		assert.Equal(t, want, n)
	}
	assert.Nil(t, vals[4], "abort_requested absent: Python treats any value as truthy")
	assert.Equal(t, []string{"p"}, e.rdb.SMembers(ctx, vals[6].(string)).Val())
}

// TestCompatSingleURLJobFigures: an `!ao` (single-page) job whose hooks
// fetched the page through a redirect, a requisite that is missing and one
// that fails, read as ArchiveBot's `!status` and log analyzer read it:
// items_downloaded counts the 2xx/3xx answers, items_queued the same (a
// single-page job's fetches never wait), so queued is 0 from start to end;
// error_count is the 4xx and 5xx; bytes_downloaded the bytes fetched, not
// the size of the hooks' output files; the analyzer finds nothing to add.
func TestCompatSingleURLJobFigures(t *testing.T) {
	e := newEnv(t, Options{})
	ctx := ctxT(t)
	bot := abbot.Bot{Redis: e.rdb}
	j := testJob(t, "http://example.com/")
	require.NoError(t, e.store.CreateJob(ctx, j))
	require.NoError(t, e.store.SetState(ctx, j.Ident, model.StateActive))
	check := func(mb float64, errs int64) {
		t.Helper()
		f, err := bot.JobFigures(ctx, j.Ident)
		require.NoError(t, err)
		assert.Equal(t, abbot.Figures{MB: mb, Errors: errs}, f)
	}
	check(0, 0)
	wget := []model.Response{
		{URL: "http://example.com/", Status: 301, Bytes: 200},
		{URL: "http://example.com/index.html", Status: 200, Bytes: 1_500_000},
		{URL: "http://example.com/gone.png", Status: 404, Bytes: 300},
		{URL: "http://example.com/api", Status: 500, Bytes: 100},
	}
	_, err := e.store.AppendLog(ctx, j.Ident, "b1", []Packet{Download(t0, wget[0]), Download(t0, wget[1]), Download(t0, wget[2]), Download(t0, wget[3])})
	require.NoError(t, err)
	_, err = e.store.RecordResult(ctx, j.Ident, "wget", model.ArchiveResult{Hook: "on_Snapshot__50_wget.sh", Status: model.StatusSucceeded, OutputBytes: 9_000_000}, wget)
	require.NoError(t, err)
	check(1.5, 2)
	// A hook that fetched nothing (a screenshot of the saved page) adds no
	// bytes, whatever its output's size.
	_, err = e.store.RecordResult(ctx, j.Ident, "shot", model.ArchiveResult{Hook: "on_Snapshot__60_screenshot.js", Status: model.StatusSucceeded, OutputBytes: 4_000_000}, nil)
	require.NoError(t, err)
	check(1.5, 2)
	h := e.rdb.HGetAll(ctx, j.Ident).Val()
	assert.Equal(t, "2", h["items_downloaded"], "the 301 and the 200")
	assert.Equal(t, "2", h["items_queued"])
	assert.Equal(t, "1500600", h["bytes_downloaded"])
	assert.Equal(t, rubyToI(h["r4xx"])+rubyToI(h["r5xx"]), rubyToI(h["error_count"]))
	inc, _ := analyzeLogs(ctx, t, e.rdb, j.Ident)
	assert.Empty(t, inc, "the analyzer adds nothing: archiveflow counted every download")
	assert.Contains(t, botStatus(ctx, t, e.rdb, j.Ident), "In progress. Downloaded 1.5 MB, 2 errors, 0 queued.")

	require.NoError(t, e.store.Finish(ctx, j.Ident, model.StateFinished))
	check(1.5, 2)
	assert.Contains(t, botStatus(ctx, t, e.rdb, j.Ident), "Job completed.")
}
