// Package warcsize owns the WARC size benchmark of issue 23: the bytes on
// disk of a crawl's job WARC against GNU wget's `-r -p --warc-file` on the
// same local site in the same run. The site has 50 pages that each show
// one 1 MB image, the same bytes under 50 URLs (a CDN's cache-busting
// query, a site's per-page copy): the crawl stores the payload once and
// writes revisit records for the rest (internal/warc Append), wget stores
// it 50 times. The crawl runs its pages through the engine in this process
// (pagefetch and outlinks, in-process built-ins), breadth first to depth 1,
// as the crawl workflow would; no Temporal or Redis is needed.
//
//	go test -run '^$' -bench WARCSize -benchtime 1x ./bench/warcsize/
package warcsize
