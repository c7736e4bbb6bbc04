// Benchmark: Redis memory per discovered URL of a crawl frontier.
//
//	go test -run '^$' -bench FrontierMemory -benchtime 1x -timeout 30m ./bench/frontier/
//
// A generated site of 100,000 URLs (60–90 bytes, news-site shaped) where
// every page has about 20 links — section navigation, links to earlier
// articles (mostly already known) and a few to new ones — is crawled to the
// end through internal/frontier by 4 concurrent claimers against a real
// redis-server (claim 50, then Discover + Complete per page). Memory is
// measured as the sum of MEMORY USAGE (SAMPLES 0: every element) over every
// key of the job (Frontier.JobKeys), at every 10,000 completed pages and at
// the end, and as the INFO used_memory delta from before the seed to the
// end. Baseline measured in the same run: the same URLs in one plain Redis
// set (dedupe only, nothing else).

package frontierbench

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/archiveflow/archiveflow/bench/benchkit"
	"github.com/archiveflow/archiveflow/internal/frontier"
	"github.com/archiveflow/archiveflow/internal/rkeys"
	"github.com/archiveflow/archiveflow/internal/testredis"
)

const (
	sitePages    = 100000
	linksPerPage = 20
	claimers     = 4
	claimSize    = 50
	sampleEvery  = 10000
)

// site is a generated crawl graph: urls[i] links to out[i].
type site struct {
	urls []string
	out  [][]int32
}

var (
	sections = []string{"news", "sport", "culture", "science", "opinion", "business", "technology", "travel", "world", "local"}
	words    = []string{"city", "council", "votes", "new", "plan", "for", "river", "bridge", "after", "years", "of", "debate",
		"team", "wins", "final", "against", "rivals", "study", "finds", "link", "between", "sleep", "and", "memory",
		"market", "rises", "as", "rates", "fall", "festival", "returns", "with", "record", "crowds"}
)

// genSite builds the site deterministically. URL i is 60–90 bytes. Page i
// links to the 10 section pages (navigation), its children in a random
// spanning tree (parent(j) uniform below j, so the crawl reaches every
// page), and earlier articles up to linksPerPage.
func genSite(n int, seed uint64) site {
	r := rand.New(rand.NewPCG(seed, 1))
	s := site{urls: make([]string, n), out: make([][]int32, n)}
	for i := range n {
		if i <= len(sections) {
			s.urls[i] = "https://www.example-daily.com/"
			if i > 0 {
				s.urls[i] += sections[i-1] + "/"
			}
			continue
		}
		target := 60 + r.IntN(31)
		var b strings.Builder
		fmt.Fprintf(&b, "https://www.example-daily.com/%s/%d/%02d/", sections[r.IntN(len(sections))], 2010+r.IntN(15), 1+r.IntN(12))
		id := "-" + strconv.Itoa(i)
		for b.Len() < target-len(id) {
			if b.Len() > 0 && !strings.HasSuffix(b.String(), "/") {
				b.WriteByte('-')
			}
			b.WriteString(words[r.IntN(len(words))])
		}
		u := b.String()
		if len(u) > target-len(id) {
			u = strings.TrimRight(u[:target-len(id)], "-")
		}
		s.urls[i] = u + id
	}
	for j := 1; j < n; j++ {
		p := 0
		if j > len(sections) {
			p = r.IntN(j)
		}
		s.out[p] = append(s.out[p], int32(j))
	}
	for i := range n {
		for k := 1; k <= len(sections) && k < n; k++ {
			s.out[i] = append(s.out[i], int32(k))
		}
		for len(s.out[i]) < linksPerPage && i > 0 {
			s.out[i] = append(s.out[i], int32(r.IntN(i)))
		}
	}
	return s
}

// start starts a real redis-server and a Frontier on it (no namespace).
func start(b *testing.B) (*redis.Client, *frontier.Frontier) {
	srv := testredis.Start(b)
	if !srv.Real() {
		b.Skip("needs a real redis-server (MEMORY USAGE, INFO commandstats)")
	}
	rdb := srv.Client()
	keys, err := rkeys.NewKeys("")
	if err != nil {
		b.Fatal(err)
	}
	f, err := frontier.New(rdb, keys, frontier.Options{})
	if err != nil {
		b.Fatal(err)
	}
	return rdb, f
}

func BenchmarkFrontierMemory(b *testing.B) {
	for range b.N {
		runMemory(b)
	}
}

func runMemory(b *testing.B) {
	ctx := context.Background()
	rdb, f := start(b)
	rt := &benchkit.RoundTrips{}
	rdb.AddHook(rt)
	s := genSite(sitePages, 12)
	var urlBytes int64
	for _, u := range s.urls {
		urlBytes += int64(len(u))
	}

	// Baseline: the URLs alone in one Redis set.
	for i := 0; i < len(s.urls); i += 1000 {
		args := make([]any, 0, 1000)
		for _, u := range s.urls[i:min(i+1000, len(s.urls))] {
			args = append(args, u)
		}
		if err := rdb.SAdd(ctx, "baseline", args...).Err(); err != nil {
			b.Fatal(err)
		}
	}
	baseline, err := rdb.MemoryUsage(ctx, "baseline", 0).Result()
	if err != nil {
		b.Fatal(err)
	}
	if err := rdb.Del(ctx, "baseline").Err(); err != nil {
		b.Fatal(err)
	}

	const ident = "benchjob"
	before, err := testredis.UsedMemory(ctx, rdb)
	if err != nil {
		b.Fatal(err)
	}
	stats0, err := benchkit.ReadRedisStats(ctx, rdb)
	if err != nil {
		b.Fatal(err)
	}
	if err := rdb.ConfigResetStat(ctx).Err(); err != nil {
		b.Fatal(err)
	}
	rt0 := rt.Load()
	index := make(map[string]int32, len(s.urls))
	for i, u := range s.urls {
		index[u] = int32(i)
	}
	b.ResetTimer()
	start := time.Now()
	if _, err := f.Seed(ctx, ident, s.urls[0], frontier.Config{MaxDepth: -1, MaxAttempts: 3}); err != nil {
		b.Fatal(err)
	}

	var (
		done        atomic.Int64
		added       atomic.Int64
		known       atomic.Int64
		mu          sync.Mutex
		peakPerURL  float64
		peakAt      int64
		firstErr    error
		wg          sync.WaitGroup
		nextSample  = int64(sampleEvery)
		sampleMu    sync.Mutex
		tokenSerial atomic.Int64
	)
	fail := func(err error) {
		mu.Lock()
		if firstErr == nil {
			firstErr = err
		}
		mu.Unlock()
	}
	sample := func() {
		sampleMu.Lock()
		defer sampleMu.Unlock()
		if done.Load() < nextSample {
			return
		}
		nextSample += sampleEvery
		total, _, err := benchkit.FrontierMemory(ctx, rdb, f, ident)
		if err != nil {
			fail(err)
			return
		}
		c, err := f.Counts(ctx, ident)
		if err != nil {
			fail(err)
			return
		}
		if per := float64(total) / float64(c.Total); per > peakPerURL {
			peakPerURL, peakAt = per, c.Total
		}
		b.Logf("%6d pages done, %6d discovered, %5d ready: %.1f bytes/URL", done.Load(), c.Total, c.Ready, float64(total)/float64(c.Total))
	}
	for w := 0; w < claimers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				mu.Lock()
				stop := firstErr != nil
				mu.Unlock()
				if stop {
					return
				}
				token := "bench-" + strconv.FormatInt(tokenSerial.Add(1), 10)
				pages, counts, err := f.Claim(ctx, ident, claimSize, token, 0)
				if err != nil {
					fail(err)
					return
				}
				if len(pages) == 0 {
					if counts.Finished() {
						return
					}
					time.Sleep(time.Millisecond) // the others hold the last pages
					continue
				}
				for _, p := range pages {
					out := s.out[index[p.URL]]
					links := make([]frontier.Link, len(out))
					for i, c := range out {
						links[i] = frontier.Link{URL: s.urls[c]}
					}
					res, err := f.Discover(ctx, ident, p.ID, p.Attempts, 0, links)
					if err != nil {
						fail(err)
						return
					}
					added.Add(int64(res.Added))
					known.Add(int64(res.Known))
					if _, err := f.Complete(ctx, ident, p.ID, p.Attempts, frontier.Outcome{Status: frontier.StatusSucceeded}); err != nil {
						fail(err)
						return
					}
					done.Add(1)
				}
				sample()
			}
		}()
	}
	wg.Wait()
	elapsed := time.Since(start)
	b.StopTimer()
	if firstErr != nil {
		b.Fatal(firstErr)
	}
	rts := rt.Load() - rt0
	cmdstats, _ := rdb.Info(ctx, "commandstats").Result()
	stats1, err := benchkit.ReadRedisStats(ctx, rdb)
	if err != nil {
		b.Fatal(err)
	}
	counts, err := f.Counts(ctx, ident)
	if err != nil {
		b.Fatal(err)
	}
	if counts.Total != sitePages || counts.Succeeded != sitePages {
		b.Fatalf("crawl ended with %+v, want all %d pages succeeded", counts, sitePages)
	}
	total, kinds, err := benchkit.FrontierMemory(ctx, rdb, f, ident)
	if err != nil {
		b.Fatal(err)
	}
	after, err := testredis.UsedMemory(ctx, rdb)
	if err != nil {
		b.Fatal(err)
	}
	if per := float64(total) / float64(counts.Total); per > peakPerURL {
		peakPerURL, peakAt = per, counts.Total
	}
	n := float64(counts.Total)
	relations := added.Load() + known.Load()
	b.ReportMetric(float64(total)/n, "bytes/url")
	b.ReportMetric(float64(after-before)/n, "used_memory-bytes/url")
	b.ReportMetric(peakPerURL, "peak-bytes/url")
	b.ReportMetric(float64(baseline)/n, "baseline-set-bytes/url")
	b.ReportMetric(float64(rts)/n, "roundtrips/page")
	b.ReportMetric(float64(stats1.Sub(stats0).Commands)/n, "server-cmds/page")
	b.ReportMetric(float64(elapsed.Microseconds())/n, "us/page")
	b.Logf("%d URLs (mean %.1f bytes), %d relations (%.1f per page, %.0f %% to known pages), %s",
		counts.Total, float64(urlBytes)/n, relations, float64(relations)/n, 100*float64(known.Load())/float64(relations), elapsed.Round(time.Millisecond))
	b.Logf("MEMORY USAGE of the job's keys: %d bytes = %.1f bytes/URL (peak %.1f at %d URLs); used_memory delta %d = %.1f bytes/URL; baseline set of the URLs %.1f bytes/URL",
		total, float64(total)/n, peakPerURL, peakAt, after-before, float64(after-before)/n, float64(baseline)/n)
	for _, k := range []string{"_frontier", "_frontier_urls", "_frontier_pages", "_frontier_links", "_frontier_fp", "_frontier_ready", "_frontier_readyz", "_frontier_claims", "_frontier_notes", "_frontier_prop", "_frontier_fpx"} {
		b.Logf("  %-18s %10d bytes  %6.1f bytes/URL", k, kinds[k], float64(kinds[k])/n)
	}
	calls, usec := scriptStats(cmdstats)
	b.Logf("Redis: %d script calls, %.0f µs per call", calls, float64(usec)/float64(calls))
}

// BenchmarkDiscoverLongLine delivers one batch of 1,000,000 new links (a
// 70 MB line of links) to a claimed page, then repeats it (a retried
// activity): the batch is split into script calls of at most
// frontier.MaxChunk links, so Redis is never blocked for the whole batch.
//
//	go test -run '^$' -bench DiscoverLongLine -benchtime 1x -v -timeout 30m ./bench/frontier/
func BenchmarkDiscoverLongLine(b *testing.B) {
	for range b.N {
		runLongLine(b)
	}
}

func runLongLine(b *testing.B) {
	const n = 1000000
	ctx := context.Background()
	rdb, f := start(b)
	const ident = "benchline"
	if _, err := f.Seed(ctx, ident, "https://www.example-daily.com/", frontier.Config{MaxDepth: -1, MaxAttempts: 3}); err != nil {
		b.Fatal(err)
	}
	pages, _, err := f.Claim(ctx, ident, 1, "line", 0)
	if err != nil || len(pages) != 1 {
		b.Fatalf("claim the seed: %v %v", pages, err)
	}
	links := make([]frontier.Link, n)
	for i := range links {
		links[i] = frontier.Link{URL: fmt.Sprintf("https://www.example-daily.com/archive/very/long/line/item-%07d.html", i)}
	}
	for _, pass := range []string{"first", "repeat"} {
		if err := rdb.ConfigResetStat(ctx).Err(); err != nil {
			b.Fatal(err)
		}
		start := time.Now()
		res, err := f.Discover(ctx, ident, pages[0].ID, pages[0].Attempts, 0, links)
		if err != nil {
			b.Fatal(err)
		}
		elapsed := time.Since(start)
		stats, _ := rdb.Info(ctx, "commandstats").Result()
		calls, usec := scriptStats(stats)
		b.Logf("%s: %s for %d links (added %d, repeated chunks %d): %d script calls, %.1f ms of Redis per call, %.2f s of Redis in all",
			pass, elapsed.Round(time.Millisecond), n, res.Added, res.Repeated, calls, float64(usec)/float64(calls)/1000, float64(usec)/1e6)
		if pass == "first" {
			b.ReportMetric(float64(usec)/float64(calls)/1000, "redis-ms/call")
			b.ReportMetric(float64(elapsed.Microseconds())/n, "us/link")
		}
	}
}

// scriptStats sums calls and microseconds of EVAL/EVALSHA from INFO commandstats.
func scriptStats(info string) (calls, usec int64) {
	for _, line := range strings.Split(info, "\n") {
		if !strings.HasPrefix(line, "cmdstat_eval") {
			continue
		}
		_, fields, _ := strings.Cut(strings.TrimSpace(line), ":")
		for _, kv := range strings.Split(fields, ",") {
			k, v, _ := strings.Cut(kv, "=")
			x, _ := strconv.ParseInt(v, 10, 64)
			switch k {
			case "calls":
				calls += x
			case "usec":
				usec += x
			}
		}
	}
	return calls, usec
}
