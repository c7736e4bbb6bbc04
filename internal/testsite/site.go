package testsite

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strconv"
)

// Kind is what a URL of the site answers.
type Kind uint8

// The kinds of URL on the site.
const (
	// KindUnknown is a URL that is not part of the site (the server answers
	// 404 and no page links it).
	KindUnknown Kind = iota
	// KindPage is an HTML page answering 200.
	KindPage
	// KindSlow is an HTML page answering 200 after Options.SlowDelay.
	KindSlow
	// KindFlaky answers 500 to its first request after Server.Reset and is
	// a KindPage after that.
	KindFlaky
	// KindError always answers 500.
	KindError
	// KindMissing is a linked URL answering 404.
	KindMissing
	// KindRedirect answers 301 to a KindPage on the main host.
	KindRedirect
	// KindCalendar is a month or day page of the infinite calendar.
	KindCalendar
	// KindOffsite is an HTML page on the other host.
	KindOffsite
	// KindAsset is a page requisite: a stylesheet or an image.
	KindAsset
)

var kindNames = [...]string{"unknown", "page", "slow", "flaky", "error", "missing", "redirect", "calendar", "offsite", "asset"}

func (k Kind) String() string {
	if int(k) < len(kindNames) {
		return kindNames[k]
	}
	return "kind(" + strconv.Itoa(int(k)) + ")"
}

// IsPage reports whether URLs of this kind are pages (a crawl's frontier
// entries) rather than requisites or foreign URLs.
func (k Kind) IsPage() bool { return k != KindUnknown && k != KindAsset }

// hasLinks reports whether a successful answer of this kind is an HTML
// document with links.
func (k Kind) hasLinks() bool {
	switch k {
	case KindPage, KindSlow, KindFlaky, KindCalendar, KindOffsite:
		return true
	}
	return false
}

// The two hosts of the site.
const (
	hostMain  = 0 // the start page's host
	hostOther = 1 // offsite pages and foreign requisites
)

// key names one URL of the site: a node of the table when >= 0, a calendar
// page (virtual, the calendar is infinite) when < 0.
type key int64

// node is one URL of the generated table.
type node struct {
	path   string
	links  []key   // pages linked, in document order
	reqs   []int32 // requisites, in document order
	target int32   // KindRedirect: where it redirects
	host   uint8
	kind   Kind
}

// Config chooses a site.
type Config struct {
	// Seed makes the random part reproducible: the same Seed and Pages give
	// the same graph.
	Seed uint64
	// Pages is the number of page URLs on the main host (every kind except
	// the calendar, which is infinite, and the offsite pages). At least
	// MinPages.
	Pages int
}

// AcceptanceConfig is the 10,000-page site of issue 12's acceptance; the
// figures in docs/crawls.md are measured on it.
var AcceptanceConfig = Config{Seed: 12, Pages: 10_000}

// MinPages is the smallest site Generate builds: the fixtures plus a small
// random tree.
const MinPages = 50

// Site is a generated site graph. It is immutable and safe for concurrent
// use; Start serves it.
type Site struct {
	cfg   Config
	nodes []node
	paths [2]map[string]int32
	// flaky lists the KindFlaky nodes (their 500-once state lives in the
	// Server).
	flaky []int32
	// home is the start page; calendarReqs are a calendar page's
	// requisites.
	home         key
	calendarReqs []int32
}

// Config returns the configuration the site was generated from.
func (s *Site) Config() Config { return s.cfg }

// Counts returns how many table URLs of each kind the site has on each host
// (the calendar is not counted: it is infinite).
func (s *Site) Counts() map[Kind]int {
	c := make(map[Kind]int)
	for i := range s.nodes {
		c[s.nodes[i].kind]++
	}
	return c
}

// Fixture paths: pages every generated site has, whatever the seed and size,
// so tests and docs can name wget's misses. Depths are a correct crawl's.
const (
	PathStart       = "/"                      // depth 0
	PathFlaky1      = "/flaky/1.html"          // 1, 500 once; links the next three and two deep shortcuts
	PathBehind1     = "/behind-flaky/1.html"   // 2, only linked from PathFlaky1
	PathBehind1a    = "/behind-flaky/1-1.html" // 3
	PathBehind1b    = "/behind-flaky/1-2.html" // 3
	PathDetour1     = "/detour/1.html"         // 1
	PathDetour2     = "/detour/2.html"         // 2, links PathLate1: wget's only way there
	PathLate1       = "/late/1.html"           // 2 via PathFlaky1, 3 via the detour
	PathLate1a      = "/late/1-1.html"         // 3
	PathFlaky2      = "/flaky/2.html"          // 2, 500 once
	PathBehind2a    = "/behind-flaky/2-1.html" // 3, only linked from PathFlaky2
	PathHub1        = "/hub/1.html"            // 1, links PathHub2 before PathMoved1
	PathHub2        = "/hub/2.html"            // 2, links PathMovedTarget1
	PathMoved1      = "/moved/1.html"          // 2, 301 to PathMovedTarget1
	PathMovedTarget = "/moved-target/1.html"   // 2 through the redirect
	PathMovedChild  = "/moved-target/1-1.html" // 3
	PathMoved2      = "/moved/2.html"          // 2, 301 to PathMovedTarget2 (a control wget gets right)
	PathMovedTarg2  = "/moved-target/2.html"   // 2
	PathMovedChild2 = "/moved-target/2-1.html" // 3
	PathSlow1       = "/slow/1.html"           // 1, slow; links two deep shortcuts
	PathError1      = "/error/1.html"          // 1, always 500
	PathMissing1    = "/missing/1.html"        // 1, 404
	PathCycle1      = "/cycle/1.html"          // 1, cycle 1 → 2 → 3 → 1, 2 links itself
	PathOffsite1    = "/ext/1.html"            // other host, 1, offsite
	PathOffsite1b   = "/ext/1-more.html"       // other host, only linked from PathOffsite1: never fetched
	PathCalendar    = "/calendar/2024/06/"     // 1, the calendar's entry
	PathCSS         = "/static/site.css"       // requisite of every page
	PathOtherCSS    = "/cdn/0.css"             // other host, requisite of the start page
	PathCycle2      = "/cycle/2.html"          // 2, links itself
	PathCycle3      = "/cycle/3.html"          // 3
)

const (
	numImages       = 64          // /static/img/N.png
	numForeign      = 16          // /cdn/N.css and /cdn/N.png on the other host
	defaultRoots    = 6           // random-tree pages linked from the start page
	calendarEntryYM = 2024*12 + 5 // month index of PathCalendar
)

// Generate builds the site for cfg. It is deterministic and takes a few
// milliseconds for 10,000 pages.
func Generate(cfg Config) (*Site, error) {
	if cfg.Pages < MinPages {
		return nil, fmt.Errorf("testsite: generate: Pages %d: must be at least %d", cfg.Pages, MinPages)
	}
	g := &gen{
		s: &Site{cfg: cfg, paths: [2]map[string]int32{make(map[string]int32, cfg.Pages+numImages+2), make(map[string]int32)}},
		r: rand.New(rand.NewPCG(cfg.Seed, 0x7e57517e)),
	}
	g.s.nodes = make([]node, 0, cfg.Pages+numImages+numForeign+cfg.Pages/100+8)
	g.assets()
	g.fixtures()
	g.bulk()
	for i := range g.s.nodes {
		n := &g.s.nodes[i]
		n.links = dedup(n.links)
		if n.kind == KindFlaky {
			g.s.flaky = append(g.s.flaky, int32(i))
		}
	}
	return g.s, nil
}

type gen struct {
	s *Site
	r *rand.Rand

	css, otherCSS int32
	images        []int32
	foreign       []int32
	home          int32
	// deep bulk pages (tree depth >= 6, or the deepest there are): shortcut
	// targets.
	deep []int32
}

func (g *gen) add(host uint8, kind Kind, path string) int32 {
	id := int32(len(g.s.nodes))
	g.s.nodes = append(g.s.nodes, node{path: path, host: host, kind: kind, target: -1})
	g.s.paths[host][path] = id
	return id
}

func (g *gen) link(from int32, to ...int32) {
	n := &g.s.nodes[from]
	for _, t := range to {
		n.links = append(n.links, key(t))
	}
}

func (g *gen) assets() {
	g.css = g.add(hostMain, KindAsset, PathCSS)
	for i := range numImages {
		g.images = append(g.images, g.add(hostMain, KindAsset, "/static/img/"+strconv.Itoa(i)+".png"))
	}
	for i := range numForeign {
		ext := ".css"
		if i%2 == 1 {
			ext = ".png"
		}
		g.foreign = append(g.foreign, g.add(hostOther, KindAsset, "/cdn/"+strconv.Itoa(i)+ext))
	}
	g.otherCSS = g.foreign[0]
}

// page adds an HTML page with the shared stylesheet.
func (g *gen) page(host uint8, kind Kind, path string) int32 {
	id := g.add(host, kind, path)
	if kind.hasLinks() {
		g.s.nodes[id].reqs = append(g.s.nodes[id].reqs, g.css)
	}
	return id
}

// fixtures builds the fixed pages (see the Path constants). The order of
// the start page's and the hubs' links matters to wget's queue.
func (g *gen) fixtures() {
	g.home = g.page(hostMain, KindPage, PathStart)
	home := g.home
	g.s.home = key(home)
	g.s.calendarReqs = []int32{g.css}
	g.s.nodes[home].reqs = append(g.s.nodes[home].reqs, g.otherCSS, g.images[0])

	f1 := g.page(hostMain, KindFlaky, PathFlaky1)
	b1 := g.page(hostMain, KindPage, PathBehind1)
	b1a := g.page(hostMain, KindPage, PathBehind1a)
	b1b := g.page(hostMain, KindPage, PathBehind1b)
	d1 := g.page(hostMain, KindPage, PathDetour1)
	d2 := g.page(hostMain, KindPage, PathDetour2)
	l1 := g.page(hostMain, KindPage, PathLate1)
	l1a := g.page(hostMain, KindPage, PathLate1a)
	f2 := g.page(hostMain, KindFlaky, PathFlaky2)
	b2a := g.page(hostMain, KindPage, PathBehind2a)
	h1 := g.page(hostMain, KindPage, PathHub1)
	h2 := g.page(hostMain, KindPage, PathHub2)
	m1 := g.page(hostMain, KindRedirect, PathMoved1)
	t1 := g.page(hostMain, KindPage, PathMovedTarget)
	t1a := g.page(hostMain, KindPage, PathMovedChild)
	m2 := g.page(hostMain, KindRedirect, PathMoved2)
	t2 := g.page(hostMain, KindPage, PathMovedTarg2)
	t2a := g.page(hostMain, KindPage, PathMovedChild2)
	s1 := g.page(hostMain, KindSlow, PathSlow1)
	e1 := g.page(hostMain, KindError, PathError1)
	x1 := g.page(hostMain, KindMissing, PathMissing1)
	c1 := g.page(hostMain, KindPage, PathCycle1)
	c2 := g.page(hostMain, KindPage, PathCycle2)
	c3 := g.page(hostMain, KindPage, PathCycle3)
	o1 := g.page(hostOther, KindOffsite, PathOffsite1)
	o1b := g.page(hostOther, KindOffsite, PathOffsite1b)

	g.link(home, f1, d1, h1, s1, e1, x1, c1, o1)
	g.s.nodes[home].links = append(g.s.nodes[home].links, calendarKey(calendarEntryYM, 0))
	g.link(f1, b1, l1) // + two deep shortcuts, added by bulk
	g.link(b1, b1a, b1b)
	g.link(b1a, b1)
	g.link(b1b, b1)
	g.link(d1, d2, f2)
	g.link(d2, l1)
	g.link(l1, l1a)
	g.link(f2, b2a)
	g.link(h1, h2, m1, m2)
	g.link(h2, t1)
	g.s.nodes[m1].target = t1
	g.link(t1, t1a)
	g.s.nodes[m2].target = t2
	g.link(t2, t2a)
	g.link(c1, c2)
	g.link(c2, c2, c3)
	g.link(c3, c1)
	g.link(o1, o1b)
	g.s.nodes[o1].reqs = append(g.s.nodes[o1].reqs, g.otherCSS)
	for _, id := range []int32{f1, b1, b1a, b1b, d1, d2, l1, l1a, f2, b2a, h1, h2, t1, t1a, t2, t2a, s1, c1, c2, c3, o1, o1b} {
		g.link(id, home)
	}
}

// bulk builds the random part: a uniform-attachment tree of /p/N.html pages
// (some of them slow or 500-once) with one long chain, cross, back and self
// links, shortcuts, and the 404, 500, redirect and offsite pages they link.
func (g *gen) bulk() {
	pages := g.s.cfg.Pages
	nErr := max(1, pages/500)
	nMissing := max(1, pages/100)
	nRedirect := max(2, pages/1000)
	nFlaky := max(2, pages/2500)
	nSlow := max(1, pages/2000)
	nOffsite := max(1, pages/500)
	nShortcut := max(1, pages/1000)
	fixed := 0 // main-host pages the fixtures made
	for i := range g.s.nodes {
		if g.s.nodes[i].host == hostMain && g.s.nodes[i].kind.IsPage() {
			fixed++
		}
	}
	tree := pages - fixed - (nErr - 1) - (nMissing - 1) - (nRedirect - 2)
	chain := max(3, pages/500)
	roots := min(defaultRoots, tree-chain)

	// Which tree pages are 500-once or slow (fixtures are the first of
	// each).
	special := make(map[int]Kind, nFlaky+nSlow)
	for _, want := range []struct {
		kind Kind
		n    int
	}{{KindFlaky, nFlaky - 2}, {KindSlow, nSlow - 1}} {
		for placed := 0; placed < want.n; {
			i := g.r.IntN(tree)
			if _, taken := special[i]; !taken {
				special[i] = want.kind
				placed++
			}
		}
	}

	ids := make([]int32, tree)
	depth := make([]int, tree)
	parent := make([]int, tree)
	next := map[Kind]int{KindFlaky: 3, KindSlow: 2}
	prefix := map[Kind]string{KindPage: "/p/", KindFlaky: "/flaky/", KindSlow: "/slow/"}
	var byDepth [][]int
	deepest := 0
	for i := range tree {
		kind := KindPage
		if k, ok := special[i]; ok {
			kind = k
		}
		n := i
		if kind != KindPage {
			n = next[kind]
			next[kind]++
		}
		ids[i] = g.page(hostMain, kind, prefix[kind]+strconv.Itoa(n)+".html")
		switch {
		case i < roots:
			parent[i] = -1
			depth[i] = 1
		case i >= tree-chain:
			if i == tree-chain {
				parent[i] = deepest
			} else {
				parent[i] = i - 1
			}
			depth[i] = depth[parent[i]] + 1
		default:
			parent[i] = g.r.IntN(i)
			depth[i] = depth[parent[i]] + 1
		}
		if parent[i] >= 0 {
			g.link(ids[parent[i]], ids[i])
		}
		if depth[i] > depth[deepest] {
			deepest = i
		}
		for len(byDepth) <= depth[i] {
			byDepth = append(byDepth, nil)
		}
		byDepth[depth[i]] = append(byDepth[depth[i]], i)
	}
	for i := range roots {
		g.link(g.home, ids[i])
	}

	// Cross links to the same or the next tree depth never shorten a path;
	// back links go to ancestors; some pages link themselves.
	for i := range tree {
		id := ids[i]
		n := &g.s.nodes[id]
		if parent[i] >= 0 {
			n.links = append([]key{key(ids[parent[i]])}, n.links...)
		}
		for range g.r.IntN(4) {
			d := depth[i] + g.r.IntN(2)
			if d >= len(byDepth) || len(byDepth[d]) == 0 {
				d = depth[i]
			}
			g.link(id, ids[byDepth[d][g.r.IntN(len(byDepth[d]))]])
		}
		if g.r.IntN(5) == 0 && parent[i] >= 0 {
			a := parent[i]
			for steps := g.r.IntN(depth[i]); steps > 0 && parent[a] >= 0; steps-- {
				a = parent[a]
			}
			g.link(id, ids[a])
		}
		if g.r.IntN(20) == 0 {
			g.link(id, id)
		}
		if g.r.IntN(10) < 3 {
			n.reqs = append(n.reqs, g.images[g.r.IntN(numImages)])
		}
		if g.r.IntN(10) == 0 {
			n.reqs = append(n.reqs, g.foreign[g.r.IntN(numForeign)])
		}
	}

	// Shortcuts from shallow pages to deep ones, so a deep page has a
	// shorter path than its tree path; the 500-once and slow fixtures carry
	// two each (a concurrent crawl discovers them late).
	minDeep := min(6, len(byDepth)-1)
	for d := minDeep; d < len(byDepth); d++ {
		for _, i := range byDepth[d] {
			g.deep = append(g.deep, ids[i])
		}
	}
	shallow := append(append([]int(nil), byDepth[1]...), byDepth[min(2, len(byDepth)-1)]...)
	randomPage := func() int32 { return ids[g.r.IntN(tree)] }
	deepPage := func() int32 { return g.deep[g.r.IntN(len(g.deep))] }
	for _, from := range []string{PathFlaky1, PathFlaky1, PathSlow1, PathSlow1} {
		g.link(g.s.paths[hostMain][from], deepPage())
	}
	for range nShortcut {
		g.link(ids[shallow[g.r.IntN(len(shallow))]], deepPage())
	}

	// 404 and 500 pages, each linked from a random tree page; redirects,
	// linked from one or two, to normal tree pages.
	for i := 2; i <= nErr; i++ {
		e := g.page(hostMain, KindError, "/error/"+strconv.Itoa(i)+".html")
		g.link(randomPage(), e)
	}
	for i := 2; i <= nMissing; i++ {
		m := g.page(hostMain, KindMissing, "/missing/"+strconv.Itoa(i)+".html")
		g.link(randomPage(), m)
	}
	for i := 3; i <= nRedirect; i++ {
		m := g.page(hostMain, KindRedirect, "/moved/"+strconv.Itoa(i)+".html")
		t := randomPage()
		for g.s.nodes[t].kind != KindPage {
			t = randomPage()
		}
		g.s.nodes[m].target = t
		g.link(randomPage(), m)
		if g.r.IntN(2) == 0 {
			g.link(randomPage(), m)
		}
	}
	// Offsite pages, linked from one to three tree pages each, linking on
	// to a page a correct crawl never fetches.
	for i := 2; i <= nOffsite+1; i++ {
		o := g.page(hostOther, KindOffsite, "/ext/"+strconv.Itoa(i)+".html")
		more := g.page(hostOther, KindOffsite, "/ext/"+strconv.Itoa(i)+"-more.html")
		g.s.nodes[o].reqs = append(g.s.nodes[o].reqs, g.otherCSS)
		g.link(o, more, g.home)
		g.link(more, g.home)
		for range 1 + g.r.IntN(3) {
			g.link(randomPage(), o)
		}
	}
	// Every tree page links home last.
	for _, id := range ids {
		g.link(id, g.home)
	}
}

// dedup drops repeated links, keeping the first.
func dedup(links []key) []key {
	out := make([]key, 0, len(links))
	for _, l := range links {
		if !slices.Contains(out, l) {
			out = append(out, l)
		}
	}
	return out
}
