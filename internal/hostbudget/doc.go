// Package hostbudget owns politeness per target host, shared by every
// worker process and every job through Redis (issue 28 scope 1 and 2):
//
//   - the host budget: at most Limits.Concurrency fetches in flight per
//     host and at least Limits.Delay between two fetch starts, fleet-wide;
//     a fetch holds a lease (Config.Lease, renewed while it runs) so a
//     killed worker's slot frees itself; on a host without delay a Gate
//     keeps a finished fetch's turn and reuses it for its next fetch of
//     the host without a round trip, asking Redis again after
//     Config.Reuse (issue 26: a turn per many fetches, not two round
//     trips per fetch), still counted in the concurrency while kept;
//   - rate-limit backoff: an answer the rate-limit rules match (429, 503,
//     configured markers: status plus optional body regex) backs the
//     whole host off until its Retry-After (seconds or HTTP date, capped)
//     or, without one, exponentially; a host rate-limited longer than
//     RateLimit.GiveUpAfter gives up its pages;
//   - the per-page verdict (Page): a page whose fetch could not get its
//     host's turn within Config.MaxWait, or whose own answer was a rate
//     limit, is postponed (back to READY with a not-before time, its
//     attempt kept) or, past the give-up limit, failed with a note.
//
// Every time is Redis' clock (TIME inside the scripts), so workers with
// skewed clocks agree; state lives in Redis (rkeys.Keys.HostBudget,
// HostInflight, HostOverrides), so it survives worker and server restarts.
// The limits are one small Lua script rather than a GCRA library
// (go-redis/redis_rate): a rate limiter has neither concurrency leases nor
// backoff, and the three must be decided atomically in one call.
//
// The frontier's claim reads the same state (LuaHostWait) to leave a
// busy or backed-off host's pages READY instead of claiming them
// (postponed to the host's turn, or left in line while the host is at
// its concurrency).
//
// Not under the budget: fetches of hooks run as processes (the start
// page's snapshot, wget, browsers); they go through the attempt's fetch
// proxy, which does not take turns yet.
package hostbudget
