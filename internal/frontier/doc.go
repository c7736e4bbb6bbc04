// Package frontier owns the frontier of a crawl job in Redis (DESIGN.md §8,
// issue 12 scope 1): every discovered URL of a job as one page, the
// (parent → child) relations between pages, each page's minimum depth, the
// ready queues pages are claimed from, and the page counts. Its keys hang
// off the job's hash key (rkeys.Keys.Job, the one owner of the namespace
// prefix); docs/redis-layout.md lists them.
//
// # Pages and states
//
// A page has a small integer id (the seed is 1, a list's start pages 1..N
// in list order (SeedList), then discovery order), its
// URL (normalised with internal/ident's Normalize, the ident's normal
// form, at most MaxURLBytes), depth, parent, attempts, attempts_remaining,
// state, last status, flags (no-recurse, requisite) and the rules version
// of its last claim. States:
//
//	READY     eligible, in the ready queue of its depth
//	CLAIMED   held by one claim (token, attempt number)
//	SKIPPED   moved aside when dequeued (rules); never fetched again
//	DONE      attempts_remaining reached 0: status succeeded or failed
//	DEFERRED  known but beyond the depth limit ("queued but ineligible");
//	          becomes READY if a shorter path brings it within the limit,
//	          is out of depth when the crawl ends
//
// A crawl is finished when no page is READY or CLAIMED and no depth
// propagation is pending (Counts.Finished), draining when none is READY and
// some are CLAIMED.
//
// # How this maps to mnbot
//
// Learned from TheTechRobo/mnbot's tracker (common/model.py, common/db.py,
// server/__main__.py). mnbot keeps pages in PostgreSQL with the statuses
// READY, CLAIMED, SKIPPED and STASHED (a DEFERRED status is commented out):
//
//   - READY here = mnbot READY with attempts_remaining > 0 and a minimum
//     relation depth within the job's depth.
//   - DEFERRED here = mnbot READY whose minimum relation depth exceeds the
//     job's depth: mnbot's dequeue filter skips it and nothing marks it;
//     here it is a state, counted, and promoted when its depth drops.
//   - CLAIMED = CLAIMED. mnbot spends an attempt at claim time; here a
//     claim only takes a fresh attempt number and outcomes spend
//     attempts_remaining, so Release (a run that stops before running its
//     pages) spends nothing.
//   - DONE = mnbot's READY with attempts_remaining 0 (finish_attempt and a
//     fatal fail_attempt set it to 0). mnbot keeps the error on the attempt
//     row; here the last status and note stay on the page.
//   - SKIPPED = SKIPPED: mnbot sets it when a skip rule matches the page at
//     dequeue; here the caller evaluates the rules after Claim and calls
//     Skip. STASHED has no counterpart.
//   - Relations: mnbot inserts one relations row per (parent, page)
//     discovery; a trigger sets its depth to the parent's minimum + 1 and,
//     when that is a new minimum for the page, lowers the relations of all
//     descendants recursively. Here the minimum depth is stored on the page
//     and a lowering is propagated through the recorded relations in
//     bounded script calls (see below), with the same result.
//   - mnbot adds the outlinks of any attempt (Item:store runs before
//     Item:finish or Item:fail). Here links are delivered at completion:
//     Discover accepts only the attempt holding the claim, and its caller
//     delivers links after the fetch succeeded, so only the attempt that
//     succeeds adds pages.
//   - mnbot records the ruleset id on the attempt row; here the rules
//     version of the last claim is kept on the page.
//
// Depth is a property of the page, the minimum over all recorded paths, not
// of the attempt: a page that fails first and succeeds later gives its links
// the same depth as if it had succeeded at once (wpull's bug, where such
// links land one level too deep, cannot happen), and a depth-limited crawl
// fetches exactly the pages within the limit whatever order pages complete
// in (TestWpullDepthBug, TestRandomGraphsMatchBFS).
//
// # Repeat-safety
//
// Activities are retried, so every write can be repeated: Seed compares
// the stored seed and configuration, SeedList the stored list and
// configuration and adds only URLs the frontier does not have, its list
// marked partial until its last call (Counts.ListPartial) (Complete also applies the caller's
// job counters, Outcome.JobCounters, only when it applies the outcome);
// Discover keeps, per page, the next
// (batch, chunk) expected from the current attempt (a claim resets it), so
// a repeated chunk is a no-op and a skipped one is refused; Complete keeps
// the attempt that last completed; Claim keeps each token's pages, so a
// repeated Claim returns them again; Skip and Release are absolute;
// Requeue (a crawl's retry) keeps one token's cursor, so a repeated or
// resumed requeue reads every page once. The keys are page id + attempt +
// batch sequence: no set of operation ids grows with the job.
//
// # Encoding (≤ 300 bytes of Redis memory per discovered URL)
//
// Measured by bench/frontier (docs/benchmarks.md). A job's memory is
// dominated by per-URL data, so the encoding avoids a Redis key or a hash
// field per page and per relation, whose overhead (dictionary entry, object
// header, key string, expiry entry: 50–100 bytes each) alone would eat the
// budget:
//
//   - Page records are 32 packed bytes (recordFormat)
//     at offset 32×slot in one string per 1000 pages, preallocated so the
//     string fits jemalloc's 32 KiB class: ~33 bytes per page. GETRANGE and
//     SETRANGE read and write one record in O(1).
//   - URLs are appended to one list per 1000 pages, at index slot: a URL
//     costs its length plus ~3 bytes in a listpack node. LINDEX is cheap on
//     a 1000-entry list.
//   - Dedupe is a fingerprint table: 8 bytes of SHA-256 of the URL → page
//     id, in small hashes addressed by linear hashing (split one bucket per
//     48 new URLs on average), so every bucket stays under Redis' default
//     listpack limit (128 entries, 64-byte values) and costs ~15 bytes per
//     URL, however large the job grows. A fingerprint hit is verified
//     against the stored URL; the rare URL whose fingerprint belongs to
//     another URL goes to a collision hash keyed by the full URL, so two
//     URLs are never merged and one URL is never two pages.
//   - Relations are packed per parent: each Discover chunk appends one
//     segment — the 4-byte index of the parent's previous segment, then
//     4-byte child ids — to the list of the parent's 1000-page bucket, and
//     the page record points to its newest segment. A relation costs 4
//     bytes; walking a page's children reads only its own segments.
//   - Ready queues are lists of page ids, one per depth, plus a sorted set
//     of the depths whose list exists; claims pop the lowest depth. An entry
//     whose page left READY or changed depth is stale and dropped when
//     popped (no O(n) LREM).
//   - Counts live in the metadata hash (n:STATE and dDEPTH:STATE fields),
//     updated by the scripts with every state change.
//
// # Bounded scripts and propagation
//
// No script call does unbounded work: Discover sends at most Options.Chunk
// (≤ MaxChunk = 1000) links per call, Claim at most MaxClaim pages, and a
// depth lowering is propagated through a queue of (page, cursor) entries,
// each call walking at most about Options.SettleBudget relations (a whole
// segment at a time). Discover settles the queue before it returns; a
// backlog left by an interrupted call is reported as Counts.Propagating and
// finished by later calls (Claim settles a bounded part first).
//
// Scripts derive bucket keys from key prefixes passed in KEYS (keyNames,
// scriptKeys): like the rest of the layout, the frontier targets a
// standalone Redis, not Redis Cluster.
package frontier
