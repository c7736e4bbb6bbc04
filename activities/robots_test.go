package activities

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/zap"

	"github.com/archiveflow/archiveflow/internal/model"
	"github.com/archiveflow/archiveflow/internal/robots"
)

// robotsStore keeps robots.txt records as the frontier does (first kept
// wins).
type robotsStore struct {
	CrawlStore
	mu   sync.Mutex
	recs map[string]robots.Record
}

func (s *robotsStore) Robots(_ context.Context, ident, origin string) (robots.Record, bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	r, ok := s.recs[ident+" "+origin]
	return r, ok, nil
}

func (s *robotsStore) KeepRobots(_ context.Context, ident, origin string, rec robots.Record) (robots.Record, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if r, ok := s.recs[ident+" "+origin]; ok {
		return r, nil
	}
	s.recs[ident+" "+origin] = rec
	return rec, nil
}

// robotsRunner answers FetchRobots with body for every origin, counting
// fetches per origin.
type robotsRunner struct {
	PageRunner
	body    string
	fetches sync.Map // origin -> *atomic.Int32
}

func (r *robotsRunner) FetchRobots(_ context.Context, in RobotsFetch) (robots.Record, error) {
	n, _ := r.fetches.LoadOrStore(in.Origin, new(atomic.Int32))
	n.(*atomic.Int32).Add(1)
	time.Sleep(10 * time.Millisecond) // let concurrent callers meet the load in flight
	return robots.Record{URL: robots.URL(in.Origin), Status: 200, Body: r.body}, nil
}

func (r *robotsRunner) count(origin string) int32 {
	n, ok := r.fetches.Load(origin)
	if !ok {
		return 0
	}
	return n.(*atomic.Int32).Load()
}

// TestObeyRobotsFetchesOncePerOriginAndReportsTheRule: disallowed page
// links are dropped and reported with the rule (unless suppressed),
// requisites kept; concurrent pages of one crawl fetch each origin's
// robots.txt once; the record, with its Crawl-delay, is kept for other
// workers (CrawlDelay).
func TestObeyRobotsFetchesOncePerOriginAndReportsTheRule(t *testing.T) {
	store := &robotsStore{recs: map[string]robots.Record{}}
	runner := &robotsRunner{body: "User-agent: *\nDisallow: /private/\nCrawl-delay: 3\n"}
	a := &CrawlActivities{store: store, pages: runner, log: zap.NewNop(), opts: CrawlOptions{LogLineBytes: 300}}
	cr := Crawl{Job: Job{Ident: "job1", URL: "http://a.example/"}, Robots: model.RobotsObey, RobotsAgent: "archiveflow/1"}
	now := time.Date(2026, 11, 26, 12, 0, 0, 0, time.UTC)
	links := []Link{
		{URL: "http://a.example/ok"},
		{URL: "http://a.example/private/x"},
		{URL: "http://a.example/private/i.png", Requisite: true},
		{URL: "http://b.example/private/y", NoRecurse: true},
	}

	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			kept, _, err := a.obeyRobots(context.Background(), cr, links, nil, false, now)
			assert.NoError(t, err)
			assert.Equal(t, []Link{links[0], links[2]}, kept)
		})
	}
	wg.Wait()
	assert.Equal(t, int32(1), runner.count("http://a.example"), "one fetch per crawl and origin")
	assert.Equal(t, int32(1), runner.count("http://b.example"))

	kept, entries, err := a.obeyRobots(context.Background(), cr, links, nil, false, now)
	require.NoError(t, err)
	assert.Equal(t, []Link{links[0], links[2]}, kept)
	assert.Equal(t, []LogEntry{
		{Kind: LogIgnore, Time: now, Hook: "page", URL: "http://a.example/private/x",
			Pattern: "http://a.example/robots.txt: User-agent *, Disallow: /private/ (/private/x)", Source: "robots.txt"},
		{Kind: LogIgnore, Time: now, Hook: "page", URL: "http://b.example/private/y",
			Pattern: "http://b.example/robots.txt: User-agent *, Disallow: /private/ (/private/y)", Source: "robots.txt"},
	}, entries)
	_, entries, err = a.obeyRobots(context.Background(), cr, links, nil, true, now)
	require.NoError(t, err)
	assert.Empty(t, entries, "suppressed ignore reports")

	// Another worker (an empty cache) reads the kept record: no fetch.
	other := &CrawlActivities{store: store, pages: runner, log: zap.NewNop(), opts: a.opts}
	_, _, err = other.obeyRobots(context.Background(), cr, links, nil, false, now)
	require.NoError(t, err)
	assert.Equal(t, int32(1), runner.count("http://a.example"))

	rec, known, err := store.Robots(context.Background(), "job1", "http://a.example")
	require.NoError(t, err)
	assert.True(t, known)
	assert.Equal(t, 3*time.Second, rec.CrawlDelay, "the Crawl-delay is kept with the record")
	_, known, err = store.Robots(context.Background(), "job1", "http://c.example")
	require.NoError(t, err)
	assert.False(t, known)
}
