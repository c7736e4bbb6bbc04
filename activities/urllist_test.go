package activities

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/temporal"
	"go.uber.org/zap"
)

// listStore records what SeedURLList writes (the other CrawlStore
// methods are not called).
type listStore struct {
	CrawlStore
	logs  map[string][]LogEntry // key → entries
	seeds []SeedListInput
}

func (s *listStore) AppendLog(_ context.Context, _, key string, _ int, entries []LogEntry) error {
	if s.logs == nil {
		s.logs = map[string][]LogEntry{}
	}
	s.logs[key] = entries
	return nil
}

func (s *listStore) SeedList(_ context.Context, in SeedListInput) (PageCounts, error) {
	s.seeds = append(s.seeds, in)
	return PageCounts{Total: int64(len(in.URLs)), Ready: int64(len(in.URLs))}, nil
}

// listRunner serves one list body, or an error.
type listRunner struct {
	PageRunner
	body string
	err  error
	got  []URLListFetch
}

func (r *listRunner) FetchURLList(_ context.Context, in URLListFetch) (URLListData, error) {
	r.got = append(r.got, in)
	return URLListData{Data: []byte(r.body), Path: "/crawl/url-list.txt"}, r.err
}

func listActs(t *testing.T, store *listStore, pages *listRunner, deny *hostDenier) *CrawlActivities {
	t.Helper()
	a, err := NewCrawl(store, pages, "host-q", deny, zap.NewNop(), CrawlOptions{HeartbeatInterval: time.Second,
		LiveInterval: time.Second, WriteTimeout: time.Second, LogLineBytes: 1000})
	require.NoError(t, err)
	return a
}

var testList = URLList{URL: "http://lists.example/l.txt", MaxBytes: 1 << 10, MaxURLs: 10, FetchTimeout: time.Second}

// TestSeedURLListSeedsTheAllowedURLsAndReportsTheRest: the listed URLs the
// policy allows are seeded at the crawl's depth and attempts; bad lines
// and denied URLs are ignore packets; the start URLs are one per host and
// directory.
func TestSeedURLListSeedsTheAllowedURLsAndReportsTheRest(t *testing.T) {
	store := &listStore{}
	pages := &listRunner{body: "# list\nhttp://a.example/x/1\n\nhttp://a.example/x/2\nnot a url\nhttp://10.0.0.1/secret\nhttp://b.example/\n"}
	deny := &hostDenier{host: "10.0.0.1", rule: "10.0.0.0/8"}
	a := listActs(t, store, pages, deny)
	res, err := a.SeedURLList(context.Background(), SeedURLListInput{Ident: "job", List: testList, MaxDepth: 0, PageAttempts: 3, UserAgent: "UA"})
	require.NoError(t, err)

	require.Len(t, pages.got, 1)
	assert.Equal(t, URLListFetch{Ident: "job", URL: testList.URL, MaxBytes: 1 << 10, Timeout: time.Second, UserAgent: "UA"}, pages.got[0])
	require.Len(t, store.seeds, 1)
	assert.Equal(t, SeedListInput{Ident: "job", List: testList.URL, MaxDepth: 0, PageAttempts: 3,
		URLs: []string{"http://a.example/x/1", "http://a.example/x/2", "http://b.example/"}}, store.seeds[0])
	assert.Equal(t, []string{"http://a.example/x/1", "http://b.example/"}, res.Starts)
	assert.Equal(t, SeedURLListResult{Counts: PageCounts{Total: 3, Ready: 3}, Starts: res.Starts, URLs: 3, Bad: 1, Denied: 1,
		Path: "/crawl/url-list.txt"}, res)

	entries := store.logs["job/url-list"]
	require.Len(t, entries, 3)
	assert.Equal(t, LogStdout, entries[0].Kind)
	assert.Contains(t, entries[0].Message, "from "+testList.URL)
	assert.Equal(t, LogEntry{Kind: LogIgnore, Time: entries[1].Time, Hook: "url-list", URL: "not a url",
		Pattern: "line 5: must be one URL (no spaces inside)", Source: "url_list"}, entries[1])
	assert.Equal(t, LogEntry{Kind: LogIgnore, Time: entries[2].Time, Hook: "url-list", URL: "http://10.0.0.1/secret",
		Pattern: "10.0.0.0/8", Source: "fetch.deny"}, entries[2])
}

// TestSeedURLListFailures: a refused or unusable list is a non-retryable
// error naming the list and the rule; a failed download is retryable.
func TestSeedURLListFailures(t *testing.T) {
	for _, c := range []struct {
		name, body string
		err        error
		retryable  bool
		want       string
	}{
		{name: "download error", err: errors.New("connection refused"), retryable: true, want: "connection refused"},
		{name: "refused", err: fmt.Errorf("url list %s: %w: HTTP status 404 Not Found: must be 2xx", testList.URL, ErrURLListRefused), want: "HTTP status 404"},
		{name: "empty", body: "# nothing\n\n", want: "names no URL to crawl"},
		{name: "only bad and denied", body: "ftp://x.example/\nhttp://10.0.0.1/\n", want: "1 bad lines, 1 URLs denied"},
		{name: "not text", body: "http://a.example/\n\x00\x01", want: "not text"},
		{name: "too many", body: "http://a.example/1\nhttp://a.example/2\nhttp://a.example/3\n", want: "more than 2"},
	} {
		t.Run(c.name, func(t *testing.T) {
			store := &listStore{}
			list := testList
			list.MaxURLs = 2
			a := listActs(t, store, &listRunner{body: c.body, err: c.err}, &hostDenier{host: "10.0.0.1", rule: "10.0.0.0/8"})
			_, err := a.SeedURLList(context.Background(), SeedURLListInput{Ident: "job", List: list, PageAttempts: 1})
			require.Error(t, err)
			assert.Contains(t, err.Error(), c.want)
			var appErr *temporal.ApplicationError
			nonRetryable := errors.As(err, &appErr) && appErr.NonRetryable()
			assert.Equal(t, !c.retryable, nonRetryable, "retryable %v", c.retryable)
			if !c.retryable && c.err == nil {
				assert.Contains(t, err.Error(), testList.URL, "the error names the list")
			}
			assert.Empty(t, store.seeds, "nothing seeded")
		})
	}
}
