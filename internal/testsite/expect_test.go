package testsite

import (
	"regexp"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// handServer is a server (never started) for a small hand-built graph:
//
//	/ → a, b, x (other host), r, /      requisites: s.css, other host's c.png
//	a → c, a, e        b → c, d, m        c → f, /        d → g
//	f (500 once) → h, b                  g → h, i        h → j
//	r: 301 → t         t → k              e: 500          m: 404
//	x (offsite) → y (offsite) → z (only reachable through y)
//
// Depths by hand: / 0; a b x r 1; t 1 (redirect inside r's fetch);
// c e d m k 2; f g 3; h i 4; j 5; y and z never.
func handServer(t *testing.T) *Server {
	t.Helper()
	s := &Site{paths: [2]map[string]int32{{}, {}}}
	add := func(host uint8, kind Kind, path string) int32 {
		id := int32(len(s.nodes))
		s.nodes = append(s.nodes, node{path: path, host: host, kind: kind, target: -1})
		s.paths[host][path] = id
		return id
	}
	css := add(hostMain, KindAsset, "/s.css")
	png := add(hostOther, KindAsset, "/c.png")
	home := add(hostMain, KindPage, "/")
	ids := map[string]int32{}
	for _, p := range []struct {
		name string
		host uint8
		kind Kind
	}{
		{"a", hostMain, KindPage}, {"b", hostMain, KindPage}, {"c", hostMain, KindPage},
		{"d", hostMain, KindPage}, {"e", hostMain, KindError}, {"f", hostMain, KindFlaky},
		{"g", hostMain, KindPage}, {"h", hostMain, KindPage}, {"i", hostMain, KindPage},
		{"j", hostMain, KindPage}, {"k", hostMain, KindPage}, {"m", hostMain, KindMissing},
		{"r", hostMain, KindRedirect}, {"t", hostMain, KindPage}, {"z", hostMain, KindPage},
		{"x", hostOther, KindOffsite}, {"y", hostOther, KindOffsite},
	} {
		ids[p.name] = add(p.host, p.kind, "/"+p.name)
	}
	ids["/"] = home
	link := func(from string, to ...string) {
		for _, n := range to {
			s.nodes[ids[from]].links = append(s.nodes[ids[from]].links, key(ids[n]))
		}
	}
	link("/", "a", "b", "x", "r", "/")
	link("a", "c", "a", "e")
	link("b", "c", "d", "m")
	link("c", "f", "/")
	link("d", "g")
	link("f", "h", "b")
	link("g", "h", "i")
	link("h", "j")
	link("t", "k")
	link("x", "y", "/")
	link("y", "z")
	s.nodes[ids["r"]].target = ids["t"]
	s.nodes[home].reqs = []int32{css, png}
	s.home = key(home)
	s.calendarReqs = []int32{css}
	s.flaky = []int32{ids["f"]}
	return &Server{site: s, bases: [2]string{"http://main.test", "http://other.test"}}
}

// paths turns an expectation's URLs back into names on the hand server.
func depthsByName(e map[string]int) map[string]int {
	out := map[string]int{}
	for u, d := range e {
		name := u[len("http://main.test"):]
		if len(name) > 1 {
			name = name[1:]
		}
		if u[:len("http://other.test")] == "http://other.test" {
			name = "other:" + u[len("http://other.test")+1:]
		}
		out[name] = d
	}
	return out
}

func TestExpectedMatchesAHandComputedGraph(t *testing.T) {
	srv := handServer(t)
	cases := []struct {
		name    string
		scope   Scope
		want    map[string]int
		skipped map[string]int
	}{
		{"unlimited, offsite once", Scope{MaxDepth: Unlimited, OffsiteOnce: true}, map[string]int{
			"/": 0, "a": 1, "b": 1, "other:x": 1, "r": 1, "t": 1,
			"c": 2, "e": 2, "d": 2, "m": 2, "k": 2, "f": 3, "g": 3, "h": 4, "i": 4, "j": 5,
		}, map[string]int{}},
		{"depth 3", Scope{MaxDepth: 3, OffsiteOnce: true}, map[string]int{
			"/": 0, "a": 1, "b": 1, "other:x": 1, "r": 1, "t": 1,
			"c": 2, "e": 2, "d": 2, "m": 2, "k": 2, "f": 3, "g": 3,
		}, map[string]int{}},
		{"depth 0", Scope{MaxDepth: 0, OffsiteOnce: true}, map[string]int{"/": 0}, map[string]int{}},
		{"no offsite", Scope{MaxDepth: 2}, map[string]int{
			"/": 0, "a": 1, "b": 1, "r": 1, "t": 1, "c": 2, "e": 2, "d": 2, "m": 2, "k": 2,
		}, map[string]int{}},
		{"redirect as a link", Scope{MaxDepth: 2, RedirectAsLink: true}, map[string]int{
			"/": 0, "a": 1, "b": 1, "r": 1, "t": 2, "c": 2, "e": 2, "d": 2, "m": 2,
		}, map[string]int{}},
		{"skip b", Scope{MaxDepth: Unlimited, Skip: []string{`/b$`}}, map[string]int{
			"/": 0, "a": 1, "r": 1, "t": 1, "c": 2, "e": 2, "k": 2, "f": 3, "h": 4, "j": 5,
		}, map[string]int{"b": 1}},
		{"skip everything", Scope{MaxDepth: Unlimited, Skip: []string{`.`}}, map[string]int{"/": 0},
			map[string]int{"a": 1, "b": 1, "r": 1}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			e, err := srv.Expected(c.scope)
			require.NoError(t, err)
			assert.Equal(t, c.want, depthsByName(e.Pages))
			assert.Equal(t, c.skipped, depthsByName(e.Skipped))
			assert.Equal(t, map[string]int{"s.css": 0, "other:c.png": 0}, depthsByName(e.Requisites),
				"requisites from any host, at the depth of the shallowest page needing them")
		})
	}
	e, err := srv.Expected(Scope{MaxDepth: Unlimited, OffsiteOnce: true})
	require.NoError(t, err)
	d, ok := e.Depth("http://main.test/j")
	assert.True(t, ok)
	assert.Equal(t, 5, d)
	_, ok = e.Depth("http://main.test/z")
	assert.False(t, ok, "a page linked only from an offsite page is never fetched")
	assert.Equal(t, []int{1, 5, 5, 2, 2, 1}, e.PagesAt())
}

func TestExpectedRejectsABadSkipPattern(t *testing.T) {
	_, err := handServer(t).Expected(Scope{MaxDepth: 1, Skip: []string{"ok", "(unclosed"}})
	require.ErrorContains(t, err, `skip pattern "(unclosed"`)
}

func TestExpectedFixtureDepths(t *testing.T) {
	srv := &Server{site: generate(t, Config{Seed: 5, Pages: 300}), bases: [2]string{"http://m.test", "http://o.test"}}
	skip, err := srv.CalendarSkipPattern(0)
	require.NoError(t, err)
	e, err := srv.Expected(Scope{MaxDepth: Unlimited, OffsiteOnce: true, Skip: []string{skip}})
	require.NoError(t, err)
	for path, want := range map[string]int{
		PathStart: 0, PathFlaky1: 1, PathBehind1: 2, PathBehind1a: 3, PathBehind1b: 3,
		PathDetour1: 1, PathDetour2: 2, PathLate1: 2, PathLate1a: 3, PathFlaky2: 2, PathBehind2a: 3,
		PathHub1: 1, PathHub2: 2, PathMoved1: 2, PathMovedTarget: 2, PathMovedChild: 3,
		PathMoved2: 2, PathMovedTarg2: 2, PathMovedChild2: 3, PathSlow1: 1, PathError1: 1,
		PathMissing1: 1, PathCycle1: 1, PathCycle2: 2, PathCycle3: 3, PathCalendar: 1,
	} {
		d, ok := e.Depth(srv.URL(path))
		if assert.True(t, ok, path) {
			assert.Equal(t, want, d, path)
		}
	}
	assert.Equal(t, 1, e.Pages[srv.OtherURL(PathOffsite1)])
	assert.NotContains(t, e.Pages, srv.OtherURL(PathOffsite1b), "offsite pages are not followed")

	// Every page of the main host's table is reachable from the start page.
	for path := range srv.site.paths[hostMain] {
		if srv.site.nodes[srv.site.paths[hostMain][path]].kind.IsPage() {
			assert.Contains(t, e.Pages, srv.URL(path))
		}
	}
	// The calendar keeps its entry month and days only.
	assert.Contains(t, e.Pages, srv.URL("/calendar/2024/06/30/"))
	assert.Equal(t, 2, e.Skipped[srv.URL("/calendar/2024/07/")])
	assert.Equal(t, 2, e.Skipped[srv.URL("/calendar/2024/05/")])
}

func TestExpectedNeedsTheCalendarContained(t *testing.T) {
	srv := &Server{site: generate(t, Config{Seed: 5, Pages: MinPages}), bases: [2]string{"http://m.test", "http://o.test"}}
	_, err := srv.Expected(Scope{MaxDepth: Unlimited})
	require.ErrorContains(t, err, "calendar trap needs a depth limit or a skip rule")

	e, err := srv.Expected(Scope{MaxDepth: Unlimited, Skip: []string{srv.CalendarPattern()}})
	require.NoError(t, err)
	assert.Equal(t, map[string]int{srv.URL(PathCalendar): 1}, e.Skipped)

	skip, err := srv.CalendarSkipPattern(2)
	require.NoError(t, err)
	e, err = srv.Expected(Scope{MaxDepth: Unlimited, Skip: []string{skip}})
	require.NoError(t, err)
	calendar := regexp.MustCompile(`/calendar/(\d+/\d+)/$`)
	months := map[string]bool{}
	days := 0
	for u := range e.Pages {
		if m := calendar.FindStringSubmatch(u); m != nil {
			months[m[1]] = true
		} else if srv.Kind(u) == KindCalendar {
			days++
		}
	}
	assert.Equal(t, map[string]bool{"2024/04": true, "2024/05": true, "2024/06": true, "2024/07": true, "2024/08": true}, months)
	assert.Equal(t, 30+31+30+31+31, days)
	assert.Equal(t, 4, e.Skipped[srv.URL("/calendar/2024/03/")])
	assert.Equal(t, 4, e.Skipped[srv.URL("/calendar/2024/09/")])
	assert.Len(t, e.Skipped, 2)

	// A depth limit contains it as well.
	e, err = srv.Expected(Scope{MaxDepth: 3})
	require.NoError(t, err)
	assert.Contains(t, e.Pages, srv.URL("/calendar/2024/08/"))
	assert.NotContains(t, e.Pages, srv.URL("/calendar/2024/09/"))
}
