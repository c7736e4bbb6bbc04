package testsite

import (
	"context"
	"errors"
	"os"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// EnvRequireWget set to 1 makes a missing wget a test failure instead of a
// skip.
const EnvRequireWget = "ARCHIVEFLOW_REQUIRE_WGET"

// runWget runs the baseline or skips the test when wget is not installed.
func runWget(t *testing.T, srv *Server, level int, extra ...string) *WgetRun {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	run, err := srv.RunWget(ctx, level, WgetOptions{ExtraArgs: extra})
	if errors.Is(err, ErrNoWget) && os.Getenv(EnvRequireWget) != "1" {
		t.Skipf("wget baseline needs Debian's wget (apt-get install wget); %s=1 makes this a failure: %v", EnvRequireWget, err)
	}
	require.NoError(t, err)
	return run
}

// TestWgetMissesInLimitPages runs wget --level=3 on a small site and on the
// acceptance site, checks that it requested exactly what the model of its
// recursion predicts, and that it misses the fixture pages a correct crawl
// fetches, for the documented reasons.
func TestWgetMissesInLimitPages(t *testing.T) {
	const level = 3
	for _, cfg := range []Config{{Seed: 1, Pages: 200}, AcceptanceConfig} {
		srv := start(t, cfg, Options{SlowDelay: 20 * time.Millisecond})
		run := runWget(t, srv, level)
		assert.Equal(t, 8, run.ExitCode, "the site answers 404 and 500")

		predicted, err := srv.PredictWget(level)
		require.NoError(t, err)
		assert.Equal(t, Diff{}, Compare(predicted.Pages, run.Pages), "pages: the model of wget is exact")
		assert.Equal(t, predicted.Pages, run.Pages, "statuses of the last answers")
		assert.Equal(t, Diff{}, Compare(predicted.Requisites, run.Requisites), "requisites")
		assert.Empty(t, run.Other, "wget asks for nothing outside the site (robots=off)")

		skip, err := srv.CalendarSkipPattern(6)
		require.NoError(t, err)
		exp, err := srv.Expected(Scope{MaxDepth: level, OffsiteOnce: true, Skip: []string{skip}})
		require.NoError(t, err)
		diff := Compare(exp.Pages, run.Pages)
		assert.Empty(t, diff.Extra, "wget fetches nothing beyond the limit")
		misses, err := srv.ExplainMisses(level, exp, diff.Missing)
		require.NoError(t, err)
		byURL := map[string]Miss{}
		for _, m := range misses {
			byURL[m.URL] = m
			assert.NotEqual(t, CauseUnexplained, m.Cause, m.URL)
			assert.LessOrEqual(t, m.Depth, level, m.URL)
		}
		for path, want := range map[string]Miss{
			PathBehind1:    {Depth: 2, Cause: CauseFailedOnce},
			PathBehind1a:   {Depth: 3, Cause: CauseFailedOnce},
			PathBehind1b:   {Depth: 3, Cause: CauseFailedOnce},
			PathBehind2a:   {Depth: 3, Cause: CauseFailedOnce},
			PathLate1a:     {Depth: 3, Cause: CauseFailedOnce, TooDeep: true},
			PathMovedChild: {Depth: 3, Cause: CauseRedirectIntoQueue, TooDeep: true},
		} {
			want.URL = srv.URL(path)
			assert.Equal(t, want, byURL[want.URL], path)
		}
		assert.Equal(t, Miss{URL: srv.OtherURL(PathOffsite1), Depth: 1, Cause: CauseOffsite}, byURL[srv.OtherURL(PathOffsite1)])
		// What wget gets right: the long way to PathLate1 (fetched at level 3
		// instead of 2), a redirect to a page not queued yet, the slow page.
		for _, path := range []string{PathLate1, PathMovedTarget, PathMovedTarg2, PathMovedChild2, PathSlow1, PathCycle3} {
			assert.Equal(t, 200, run.Pages[srv.URL(path)], path)
		}
		assert.Equal(t, 500, run.Pages[srv.URL(PathFlaky1)], "wget asked once and took the 500")
		assert.Equal(t, 301, run.Pages[srv.URL(PathMoved1)])
		assert.Equal(t, 301, run.Pages[srv.URL(PathMoved2)])
		for _, r := range srv.Requests() {
			if r.URL == srv.URL(PathFlaky1) {
				assert.Equal(t, 500, r.Status, "no second request for the 500-once page")
			}
		}
		t.Logf("%d pages, level %d: expected %d pages, wget %d (missing %d: %v), requisites expected %d, wget %d; wget took %v",
			cfg.Pages, level, len(exp.Pages), len(run.Pages), len(diff.Missing), CountCauses(misses),
			len(exp.Requisites), len(run.Requisites), run.Elapsed.Round(time.Millisecond))
	}
}

// TestWgetRetryingHTTP500KeepsOnlyTheOtherMisses shows the cause: with
// --retry-on-http-error=500 wget asks the 500-once pages again at once and
// gets their links; the redirect and offsite misses stay.
func TestWgetRetryingHTTP500KeepsOnlyTheOtherMisses(t *testing.T) {
	const level = 3
	srv := start(t, Config{Seed: 1, Pages: 200}, Options{SlowDelay: -1})
	run := runWget(t, srv, level, "--retry-on-http-error=500", "--waitretry=0")
	exp, err := srv.Expected(Scope{MaxDepth: level, OffsiteOnce: true, Skip: []string{srv.CalendarPattern()}})
	require.NoError(t, err)
	diff := Compare(exp.Pages, run.Pages)
	assert.Equal(t, 200, run.Pages[srv.URL(PathFlaky1)])
	misses, err := srv.ExplainMisses(level, exp, diff.Missing)
	require.NoError(t, err)
	var causes []string
	for _, m := range misses {
		causes = append(causes, m.Cause)
	}
	assert.NotContains(t, causes, CauseFailedOnce)
	assert.Contains(t, diff.Missing, srv.URL(PathMovedChild))
	assert.Contains(t, diff.Missing, srv.OtherURL(PathOffsite1))
	assert.NotContains(t, diff.Missing, srv.URL(PathBehind1a))
}

func TestWgetBaselineRefusesAnUnlimitedLevel(t *testing.T) {
	srv := &Server{site: generate(t, Config{Pages: MinPages})}
	for _, level := range []int{0, Unlimited} {
		_, err := srv.RunWget(context.Background(), level, WgetOptions{})
		require.ErrorContains(t, err, "must be at least 1")
		_, err = srv.PredictWget(level)
		require.ErrorContains(t, err, "must be at least 1")
		_, err = srv.ExplainMisses(level, &Expectation{}, nil)
		require.ErrorContains(t, err, "must be at least 1")
	}
	_, err := srv.RunWget(context.Background(), 1, WgetOptions{Binary: "/nonexistent/wget"})
	require.ErrorIs(t, err, ErrNoWget)
}

func TestCompare(t *testing.T) {
	d := Compare(map[string]int{"a": 1, "b": 2, "c": 3}, map[string]bool{"b": true, "d": true, "e": true})
	assert.Equal(t, Diff{Missing: []string{"a", "c"}, Extra: []string{"d", "e"}}, d)
	assert.Equal(t, map[string]int{"offsite": 1, "failed-once (too deep)": 2}, CountCauses([]Miss{
		{Cause: CauseOffsite}, {Cause: CauseFailedOnce, TooDeep: true}, {Cause: CauseFailedOnce, TooDeep: true},
	}))
}
