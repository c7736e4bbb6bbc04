// Package plugins holds archiveflow's built-in hook set, one sub-directory
// per plugin (headers, screenshot, pdf, dom, title, wget, favicon, outlinks,
// htmltotext, hashes, index), each with its hook file and config.json. The
// hook files are POSIX sh wrappers that exec `$ARCHIVEFLOW_BIN hook NAME "$@"`;
// the Go implementation is internal/builtin.
//
// The set is embedded in every binary that runs workers, so a binary works
// without a checkout: Materialise writes it once per content version into a
// directory on the worker host (ROOT/builtin-HASH/), which then is the first
// plugin root of discovery. The tests run every plugin through discovery
// (internal/hooks) and the real runner (internal/procs) against a local test
// site. See docs/plugins.md.
package plugins
