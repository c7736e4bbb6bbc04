// Package testsite owns the generated web site that crawl tests and
// benchmarks run against, and the truth about it: a deterministic site graph
// (Generate), a loopback server that serves it and logs every request
// (Start), the pages a depth-limited crawl must fetch, computed from the
// site's own graph (Server.Expected), and the wget baseline the crawl is
// compared with (Server.RunWget, Server.PredictWget, Server.ExplainMisses).
// It is a normal package, not a _test file, so bench/ and internal/e2e use
// the same site.
//
// # The site
//
// Generate(Config{Seed, Pages}) builds Pages page URLs on the main host
// (127.0.0.1) from a seed; the same seed and size give the same graph. Beside
// a random tree of /p/N.html pages (uniform attachment, tree depths up to
// ~20 at 10,000 pages, plus one long chain; crawl depths 1 to ~12 and the
// chain down to 28 once the shortcuts count), every page links back to its
// parent and to the start page, some link to themselves, to siblings and cousins
// one level down (cross links that never shorten a path), to random
// ancestors (back links), and a few shallow pages link to deep ones
// (shortcuts). Page requisites are a shared stylesheet, images, and CSS and
// images on a second loopback host (127.0.0.2, "requisites from any host").
// Some pages link to pages on that other host (offsite links: ArchiveBot
// fetches them once, without following their links; each links on to a
// further offsite page that a correct crawl never fetches). The table also
// holds 404 pages (/missing/), pages that always answer 500 (/error/), pages
// that answer 500 to their first request after Server.Reset and 200 after
// (/flaky/), slow pages (/slow/, answer after Options.SlowDelay, so a
// concurrent crawl completes them last), redirects (/moved/ answers 301 to a
// normal page), link cycles, and an infinite calendar (/calendar/YYYY/MM/
// links the previous and next month forever, and each of its days) linked
// from the start page. The calendar is not part of Pages; a crawl contains
// it with a skip rule (Server.CalendarSkipPattern) or a depth limit.
//
// A fixed set of fixture pages (the same for every seed and size, see
// fixtures in site.go) makes wget's misses concrete; the random part adds
// more of each kind in proportion to Pages.
//
// # Expected crawl
//
// Server.Expected(Scope) walks the graph breadth first from the start page
// with ArchiveBot's scope and mnbot's depths: a page's depth is its shortest
// link distance from the start page; pages on the start host are followed;
// pages on the other host are fetched once without recursion when
// Scope.OffsiteOnce is set and never otherwise; 404 and 500 pages are fetched
// and have no links; a 500-once page has its links (a crawl retries it); a
// redirect is followed inside the fetch of the page that redirects, so its
// target is requested at that page's depth and the target's links are one
// level below it (as wpull and a browser behave; Scope.RedirectAsLink counts
// the redirect as a link instead); pages matching a Scope.Skip pattern are
// not fetched and their links are not discovered (mnbot's `skip` rule).
// Pages at MaxDepth are fetched and not followed.
//
// # The wget baseline and its depth bug
//
// Server.RunWget runs Debian's wget with BaselineArgs (ArchiveBot's wpull
// options translated to wget: --recursive --level=N --page-requisites
// --no-parent -e robots=off --tries=3 --waitretry=5 --timeout=20
// --inet4-only --delete-after --no-verbose) and reads what it requested from
// the server's log, not from wget's output. Run against the same site, wget
// misses pages a correct depth-limited crawl fetches, for three reasons, all
// of them reproduced by Server.PredictWget (a model of wget 1.21's
// recursion, src/recur.c) and named per page by Server.ExplainMisses:
//
//   - failed-once: wget asks for every URL once. It retries network errors
//     (--tries) but takes an HTTP 500 as final unless --retry-on-http-error
//     lists it, and its blacklist of queued URLs never lets it ask again
//     later. A page that answers 500 once is therefore lost for the whole
//     run: none of its links are read. Pages only it reaches within the
//     limit are never requested; pages it reaches by a shorter path than any
//     other are found later through that longer path, one level (or more)
//     too deep — at the limit wget fetches them and does not follow their
//     links, so their children are missed. This is the depth bug the issue
//     names: a crawler that retries the page later (wpull) finds the same
//     links, but at the wrong depth.
//   - redirect-into-queue: wget follows a redirect inside the fetch, at the
//     depth of the redirecting page (a redirect does not cost a level), but
//     it reads the target's links only if the target is not on its
//     blacklist yet. When a page at the same depth, earlier in wget's queue,
//     already linked the target, the target is fetched through the redirect
//     and not parsed; its own queue entry is one level deeper, at the limit,
//     so the links it should have contributed at depth d+1 are never
//     followed.
//   - offsite: without --span-hosts wget never leaves the start host, so the
//     offsite pages ArchiveBot fetches once (and the other host's
//     requisites) are never requested; with --span-hosts it would recurse
//     into the other host instead, which ArchiveBot does not do either.
//
// wget's queue is first-in first-out and it fetches one page at a time, so
// apart from those cases it gets every depth right: a shortcut is never
// discovered "late" by wget. Late discoveries are a concurrent crawler's
// problem; the slow and 500-once pages carry shortcuts to deep pages to
// exercise it. docs/crawls.md shows the misses on the 10,000-page site.
package testsite
