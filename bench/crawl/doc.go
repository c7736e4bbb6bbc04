// Package crawl owns the crawl throughput benchmark of issue 12: one crawl
// job of a generated local site (internal/testsite, served on loopback by
// a child process so its CPU is counted apart) with the default page
// plugin set, on the embedded dev server and a real redis-server, run by
// 1, 2 and 4 separate worker processes. It reports pages/s, and per page
// the CPU of the Temporal server (with the bench client), the workers, the
// hook processes (the start page's), the site and Redis, the crawl's
// history events (every run, continue-as-new included), and the Redis
// memory per discovered URL. It links the Temporal server, so it builds
// only with `-tags dev`:
//
//	go test -tags dev,bench -run '^$' -bench Crawl -benchtime 1x -timeout 60m ./bench/crawl/
//	go test -tags dev,bench -run '^$' -bench 'Crawl/workers=1$' -benchtime 1x ./bench/crawl/ -pages 500
//
// -pages sets the site's size (default 5,000 generated pages: 5,422 URLs,
// enough for the crawl to continue as new), -slots the slots of each
// worker process (the job's concurrency is every slot of every process),
// -historyevents N crawl.history_events (500..40000), to see continue-as-new
// on a small site.
//
// BenchmarkWire is issue 26's side-by-side: a static site (-wirepages,
// default 2,000 pages, each with a title, six links, a shared CSS and
// image) crawled by GNU `wget -r -l inf -p --warc-file` and by archiveflow
// (one worker process, job concurrency 1 and 8), alternating -wirerounds
// times in one run, served by nginx when it is on PATH (one process,
// master_process off) or by this binary as a Go file server in its own
// process (-wireserver). The worker runs the default politeness machinery
// (crawl.per_host on: every fetch takes its host's turn), with the host's
// concurrency the largest job concurrency (8) and no delay. It prints, per crawl, pages/s, CPU per page of
// every process involved and the cores busy, the machine's speed then
// (benchkit.Probe: the CPU time of a fixed hash around the crawl, which
// moves when a shared machine's CPU does, not when our code does), and
// for archiveflow its history events and Redis round trips
// (total_reads_processed) and commands per page; then the medians'
// ratios to wget's:
//
//	go test -tags dev,bench -run '^$' -bench Wire -benchtime 1x -timeout 60m ./bench/crawl/
package crawl
