// Package hooks owns the hook contract's discovery and configuration
// (DESIGN.md §3 "Discovery" and "Configuration"):
//
//   - the hook file name grammar on_Snapshot__NN_desc[.finite|.daemon][.bg].ext
//     (ParseName), shared by the crawl-level on_CrawlSetup__ hooks
//     (ParseEventName, DiscoverEvent);
//   - discovery of plugin directories under ordered plugin roots, with later
//     roots overriding earlier ones, x-runtimes filtering and the execution
//     order NN-then-filename (Discover, Plan);
//   - a plugin's config.json, a JSONSchema draft-07 subset (LoadSchema,
//     ParseSchema, Schema);
//   - tolerant discovery: one bad plugin or hook name is reported on its
//     hooks (Hook.Skip, Hook.Warning), never a failed discovery;
//   - a plugin's dependencies: required_binaries and binaries.jsonl, their
//     {KEY} templates, required_plugins, and which plugins cannot run on a
//     host (deps.go: Binary, LoadBinaries, Plan.Unmet, Plan.CheckBinaries);
//   - resolution of every config key through job overrides, process env
//     (canonical name, then x-aliases), the archiveflow config file,
//     x-fallback and defaults with {KEY} templates, validation, the
//     <PLUGIN>_ENABLED switch, the timeout and the env serialisation handed
//     to the hook (Schema.Resolve, Resolved, ConfigError).
//
// It does not run hooks: the runner takes a Hook and a Resolved and starts
// the process. Everything here is deterministic and free of Temporal; a Plan
// and a Schema survive a JSON round trip so a discovery activity can return
// them to a workflow.
package hooks
