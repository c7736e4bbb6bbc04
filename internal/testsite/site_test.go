package testsite

import (
	"crypto/sha256"
	"fmt"
	"slices"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// digest hashes everything a site's graph is made of.
func digest(s *Site) string {
	h := sha256.New()
	for i := range s.nodes {
		n := &s.nodes[i]
		fmt.Fprintf(h, "%d %d %s %d|", n.host, n.kind, n.path, n.target)
		for _, l := range n.links {
			fmt.Fprintf(h, "%s ", s.path(l))
		}
		fmt.Fprintf(h, "|%v\n", n.reqs)
	}
	return fmt.Sprintf("%x", h.Sum(nil))
}

func generate(t testing.TB, cfg Config) *Site {
	t.Helper()
	s, err := Generate(cfg)
	require.NoError(t, err)
	return s
}

func TestGenerateIsDeterministic(t *testing.T) {
	a := generate(t, Config{Seed: 3, Pages: 500})
	b := generate(t, Config{Seed: 3, Pages: 500})
	c := generate(t, Config{Seed: 4, Pages: 500})
	assert.Equal(t, digest(a), digest(b), "same seed and size, same graph")
	assert.NotEqual(t, digest(a), digest(c), "another seed, another graph")
	assert.Equal(t, Config{Seed: 3, Pages: 500}, a.Config())
}

func TestGenerateHasPagesOnTheMainHostAndEveryFeature(t *testing.T) {
	for _, pages := range []int{MinPages, 200, 1000} {
		s := generate(t, Config{Seed: 9, Pages: pages})
		main := 0
		selfLinks := 0
		for i := range s.nodes {
			n := &s.nodes[i]
			if n.host == hostMain && n.kind.IsPage() {
				main++
			}
			for _, l := range n.links {
				if l == key(i) {
					selfLinks++
				}
			}
			if n.kind == KindRedirect {
				require.GreaterOrEqual(t, n.target, int32(0), n.path)
				assert.Equal(t, KindPage, s.nodes[n.target].kind, "%s redirects to a normal page", n.path)
			}
			if n.kind.hasLinks() {
				assert.Contains(t, n.reqs, s.paths[hostMain][PathCSS], "%s has the stylesheet", n.path)
			}
		}
		assert.Equal(t, pages, main, "Pages counts the main host's page URLs")
		counts := s.Counts()
		for _, k := range []Kind{KindPage, KindSlow, KindFlaky, KindError, KindMissing, KindRedirect, KindOffsite, KindAsset} {
			assert.Positive(t, counts[k], "%d pages: kind %s", pages, k)
		}
		assert.Positive(t, selfLinks, "self links")
		assert.Len(t, s.flaky, counts[KindFlaky])
		foreign := 0
		for i := range s.nodes {
			if s.nodes[i].host == hostOther && s.nodes[i].kind == KindAsset {
				foreign++
			}
		}
		assert.Equal(t, numForeign, foreign, "requisites on the other host")
	}
}

func TestGenerateRejectsATinySite(t *testing.T) {
	_, err := Generate(Config{Pages: MinPages - 1})
	require.ErrorContains(t, err, fmt.Sprintf("Pages %d: must be at least %d", MinPages-1, MinPages))
}

func TestKindNames(t *testing.T) {
	assert.Equal(t, "flaky", KindFlaky.String())
	assert.Equal(t, "kind(99)", Kind(99).String())
	assert.False(t, KindAsset.IsPage())
	assert.False(t, KindUnknown.IsPage())
	assert.True(t, KindMissing.IsPage(), "a linked 404 is a page a crawl fetches")
}

// TestAcceptanceSite checks the 10,000-page site's size and depth spread
// and that it serves its pages (every tenth: the race detector makes each
// request costly; BenchmarkServe measures the rate).
func TestAcceptanceSite(t *testing.T) {
	srv := start(t, AcceptanceConfig, Options{SlowDelay: -1})
	skip, err := srv.CalendarSkipPattern(6)
	require.NoError(t, err)
	all, err := srv.Expected(Scope{MaxDepth: Unlimited, OffsiteOnce: true, Skip: []string{skip}})
	require.NoError(t, err)
	perDepth := all.PagesAt()
	t.Logf("pages per depth: %v", perDepth)
	assert.GreaterOrEqual(t, len(perDepth), 20, "pages down to depth 20 and beyond")
	for d := 1; d <= 10; d++ {
		assert.GreaterOrEqual(t, perDepth[d], 10, "depth %d", d)
	}
	counts := srv.Site().Counts()
	assert.Equal(t, 100, counts[KindMissing])
	assert.Equal(t, 20, counts[KindError])
	assert.Equal(t, 4, counts[KindFlaky])

	var pages []string
	for path, id := range srv.Site().paths[hostMain] {
		if srv.Site().nodes[id].kind.IsPage() {
			pages = append(pages, srv.URL(path))
		}
	}
	require.Len(t, pages, AcceptanceConfig.Pages)
	slices.Sort(pages)
	var sample []string
	for i := 0; i < len(pages); i += 10 {
		sample = append(sample, pages[i])
	}
	statuses := fetchAll(t, sample, 4)
	require.Len(t, statuses, len(sample))
	for u, st := range statuses {
		if srv.Kind(u) == KindPage {
			require.Equal(t, 200, st, u)
		}
	}
	assert.Equal(t, len(sample), srv.RequestCount())
}

// BenchmarkGenerate measures building the 10,000-page site.
func BenchmarkGenerate(b *testing.B) {
	for b.Loop() {
		if _, err := Generate(AcceptanceConfig); err != nil {
			b.Fatal(err)
		}
	}
}
