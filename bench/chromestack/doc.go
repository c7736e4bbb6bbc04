// Package chromestack owns issue 27's side-by-side of the single-page
// Chrome stack: ArchiveBox's own browser plugins (abx-plugins' chrome,
// headers, screenshot, pdf, dom and title, unmodified) archiving one local
// page whose content is partly built by JavaScript and whose non-ASCII
// title the page declares, by abx-dl and by archiveflow (the embedded dev
// server, a real redis-server, the pools in the bench process), alternating
// in one run. Each run's wall time is from the command's (abx-dl) or the
// submission's (archiveflow) start to the job's end, browser launch and
// teardown included; every hook must succeed (the per-snapshot launcher is
// skipped under CHROME_ISOLATION=crawl, as abx-plugins does) in both.
//
// Neither tool is in a registry CI reaches, so the bench skips unless both
// are named (docs/benchmarks.md §25 says how they were set up):
//
//	ABX_PLUGINS_DIR=/path/to/abx-plugins/abx_plugins/plugins \
//	ABXDL_BIN=/path/to/abx-dl \
//	go test -tags dev,bench -run '^$' -bench ChromeStack -benchtime 1x ./bench/chromestack/ -rounds 5
//
// The hooks' own dependencies (abxpkg on PATH, Node 22, Chromium, the
// npm packages abxpkg installs into ABXPKG_LIB_DIR) come from the bench's
// environment, which both tools pass on to the hooks.
package chromestack
