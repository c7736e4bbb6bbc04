package activities

import (
	"context"
	"net/url"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/zap"

	"github.com/archiveflow/archiveflow/internal/model"
	"github.com/archiveflow/archiveflow/internal/scope"
)

// hostDenier is a scope.Denier that denies every URL on its host, naming
// rule; it records what it was asked.
type hostDenier struct {
	host, rule string
	asked      []string
}

func (d *hostDenier) Deny(_ context.Context, raw string) (string, bool) {
	d.asked = append(d.asked, raw)
	u, err := url.Parse(raw)
	if err == nil && u.Host == d.host {
		return d.rule, true
	}
	return "", false
}

// TestJudgeLinksReportsFetchDenyEvenWhenSuppressed: a link the fetch policy denies is not
// queued and is reported as an ignore packet naming the rule, with source
// fetch.deny, even when the job suppresses ignore reports; an ignored link
// is then not reported, an allowed one is queued.
func TestJudgeLinksReportsFetchDenyEvenWhenSuppressed(t *testing.T) {
	const (
		start  = "http://site.example/"
		denied = "http://169.254.169.254/latest/meta-data/"
		img    = "http://169.254.169.254/i.png"
		rule   = "169.254.0.0/16"
	)
	sc, err := scope.New(start, scope.Config{OffsiteOnce: true})
	require.NoError(t, err)
	found := []Discovered{
		{URL: denied},
		{URL: img, Requisite: true},
		{URL: start + "ignored/x"},
		{URL: start + "ok"},
	}
	now := time.Date(2026, 11, 22, 18, 0, 0, 0, time.UTC)
	for _, suppress := range []bool{false, true} {
		deny := &hostDenier{host: "169.254.169.254", rule: rule}
		judge := &scope.Judge{Scope: sc, Ignores: scope.CompileIgnores([]string{"/ignored/"}, start), Deny: deny}
		live := LiveSettings{Ignores: []string{"/ignored/"}, SuppressIgnoreReports: suppress}
		prior := []LogEntry{{Kind: LogStdout, Time: now, Message: "before"}}
		links, entries := judgeLinks(context.Background(), zap.NewNop(), judge, live, PageSpec{ID: 1, URL: start, Attempt: 1},
			found, prior, now, 1000)

		assert.Equal(t, []Link{{URL: start + "ok"}}, links, "suppress %v: only the allowed link is queued", suppress)
		assert.Contains(t, deny.asked, denied, "every discovered link is put to the policy")
		want := []LogEntry{
			prior[0],
			{Kind: LogIgnore, Time: now, Hook: "page", URL: denied, Pattern: rule, Source: "fetch.deny"},
			{Kind: LogIgnore, Time: now, Hook: "page", URL: img, Pattern: rule, Source: "fetch.deny"},
		}
		if !suppress {
			want = append(want, LogEntry{Kind: LogIgnore, Time: now, Hook: "page", URL: start + "ignored/x", Pattern: "/ignored/", Source: "accept_url"})
		}
		assert.Equal(t, want, entries, "suppress %v", suppress)
	}
}

// TestRefusedLinksAreReported: a link the frontier refuses (a 100 KB URL)
// is an ignore packet naming the rule and the link's size, source
// "frontier", never dropped without a word.
func TestRefusedLinksAreReported(t *testing.T) {
	a := &CrawlActivities{opts: CrawlOptions{LogLineBytes: 300}}
	now := time.Date(2026, 11, 26, 12, 0, 0, 0, time.UTC)
	long := "http://site.example/" + string(make([]byte, 10))
	assert.Equal(t, []LogEntry{{Kind: LogIgnore, Time: now, Hook: "page", URL: long,
		Pattern: "longer than 8192 bytes (102400 bytes)", Source: "frontier"}},
		a.refusedEntries([]RefusedLink{{URL: long, Bytes: 102400, Rule: "longer than 8192 bytes"}}, now))
	assert.Empty(t, a.refusedEntries(nil, now), "nothing refused, nothing written")
}

// TestReusedRequisitesCountButAreNoDownload: a page's Response record of a
// requisite the crawl fetched for an earlier page (reused) is in the
// page's tally, so the crawl counts the requisite even if the attempt
// that fetched it was never recorded, but it is no download packet of
// this page in the job's log.
func TestReusedRequisitesCountButAreNoDownload(t *testing.T) {
	a := &CrawlActivities{store: &batchStore{}, opts: CrawlOptions{LogLineBytes: 300}}
	page := model.Response{URL: "http://site.example/p", Status: 503, Bytes: 10}
	fetched := model.Response{URL: "http://site.example/a.png", Status: 200, Bytes: 70, Requisite: true}
	reused := model.Response{URL: "http://site.example/main.css", Status: 200, Bytes: 67, Requisite: true, Reused: true}
	_, w, err := a.pageWrite(context.Background(), donePage{log: zap.NewNop(), logResponses: true,
		in:  RunPageInput{Page: PageSpec{ID: 7, URL: page.URL, Attempt: 2}},
		out: PageOutcome{Status: PageTransient, Responses: []model.Response{page, fetched, reused}}})
	require.NoError(t, err)
	var downloads []string
	for _, e := range w.Entries {
		if e.Kind == LogDownload {
			downloads = append(downloads, e.Response.URL)
		}
	}
	assert.Equal(t, []string{page.URL, fetched.URL}, downloads, "a reused requisite is no download of this page")
	assert.Equal(t, map[string]FetchTally{
		fetched.URL: {Responses: model.ResponseCounts{Count: 1, R2xx: 1, Bytes: 70}},
		reused.URL:  {Responses: model.ResponseCounts{Count: 1, R2xx: 1, Bytes: 67}},
	}, w.Tally.Requisites, "the reused requisite counts (once per crawl, by the frontier)")
}
