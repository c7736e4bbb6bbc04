// Package rkeys owns archiveflow's Redis layout (DESIGN.md §5): every key
// name, every value encoding and the Lua scripts of the job layout (a
// crawl's frontier keys are named here, their scripts are
// internal/frontier's; the host budget's are internal/hostbudget's; every
// script of every layout is declared and run through internal/luascript).
// The rest of the code never builds a key by hand; it calls a Store method, and the Store writes
// the ArchiveBot job layout (the IDENT hash, IDENT_log, IDENT_ignores, the
// pending/working lists, the jobs_* counters, finish_notifications,
// pipeline:ID records), kickq-style indexes (state:STATE, time-index,
// scheduled, scheduled-purge) and Flapjack-style events (events_archive:HOUR,
// event_counters, executive_instance:HOST:PID).
//
// Every write a Temporal activity may repeat on retry is safe to repeat:
// values are absolute, or increments are guarded by an idempotency key
// checked and recorded inside the same Lua script. docs/redis-layout.md
// lists every key, its type, encoding, writer, expiry and origin.
//
// A package that owns a layout beside this one (internal/fleethealth:
// Flapjack's checks) runs its scripts with this layout's prelude
// (NewScript, Store.RunScript: the return codes, inherit_ttl).
package rkeys
