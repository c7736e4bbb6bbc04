package frontier

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
	"go.uber.org/zap"
)

// Every key of a job's frontier is the job hash's key (rkeys.Keys.Job, the
// one owner of the namespace prefix) plus a suffix. Keys ending in ':' are
// prefixes of bucket keys: the scripts append a bucket number (pages
// 1..1000 are bucket 0, ...), a linear-hashing bucket or a depth.
//
// scriptKeys is the one list of them: keyNames builds a script's KEYS from
// it and newScript binds each to a Lua local of the same name (luascript),
// so Go and Lua never disagree on a position.
var scriptKeys = []struct{ name, suffix string }{
	{"meta", "_frontier"},          // hash: config, id sequence, linear-hash state, counts
	{"job", ""},                    // rkeys' job hash (QueuedField counter only)
	{"claims", "_frontier_claims"}, // hash: p:ID -> token, t:TOKEN -> packed ids
	{"notes", "_frontier_notes"},   // hash: ID -> last note
	{"prop", "_frontier_prop"},     // list: pending depth propagation (id, cursor)
	{"readyz", "_frontier_readyz"}, // zset: depths whose ready list exists
	{"fpx", "_frontier_fpx"},       // hash: URL -> ID for fingerprint collisions
	{"once", "_frontier_once"},     // set: keys of fetches counted once per crawl (Outcome.Once)
	{"robots", "_frontier_robots"}, // hash: origin -> its robots.txt record (KeepRobots)
	{"again", "_frontier_again"},   // list: ids of charged pages made READY again (ClaimWithin's budget)
	{"later", "_frontier_later"},   // zset: READY pages not before a time (page id -> ms, Redis' clock)
	{"retry", "_frontier_retry"},   // zset: READY pages waiting for a later retry (page id -> due ms, Redis' clock)
	{"urls_p", "_frontier_urls:"},  // list per page bucket: URLs by slot
	{"pages_p", "_frontier_pages:"},
	{"links_p", "_frontier_links:"},
	{"fp_p", "_frontier_fp:"},
	{"ready_p", "_frontier_ready:"},
}

// keyNames returns the KEYS of every frontier script for one job.
func (f *Frontier) keyNames(ident string) []string {
	base := f.keys.Job(ident)
	out := make([]string, len(scriptKeys))
	for i, k := range scriptKeys {
		out[i] = base + k.suffix
	}
	return out
}

// key returns one named key (or prefix) of a job.
func (f *Frontier) key(ident, name string) string {
	for _, k := range scriptKeys {
		if k.name == name {
			return f.keys.Job(ident) + k.suffix
		}
	}
	panic("frontier: unknown key name " + name) // a bug: names are constants
}

// scriptKeyNames are scriptKeys' names, the Lua locals of every script.
var scriptKeyNames = func() []string {
	out := make([]string, len(scriptKeys))
	for i, k := range scriptKeys {
		out[i] = k.name
	}
	return out
}()

// layout is what JobKeys needs to enumerate bucket keys.
type layout struct {
	lastID         int64
	lhLevel, split int64
	depths         []string
}

func (f *Frontier) readLayout(ctx context.Context, ident string) (layout, bool, error) {
	var l layout
	var meta *redis.SliceCmd
	var depths *redis.StringSliceCmd
	_, err := f.rdb.TxPipelined(ctx, func(p redis.Pipeliner) error {
		meta = p.HMGet(ctx, f.key(ident, "meta"), "next_id", "lh_level", "lh_split")
		depths = p.ZRange(ctx, f.key(ident, "readyz"), 0, -1)
		return nil
	})
	if err != nil {
		return l, false, fmt.Errorf("read frontier layout of job %s: %w", ident, err)
	}
	vals := meta.Val()
	if vals[0] == nil {
		return l, false, nil
	}
	num := func(v any) int64 {
		s, _ := v.(string)
		n, _ := strconv.ParseInt(s, 10, 64)
		return n
	}
	l.lastID, l.lhLevel, l.split = num(vals[0]), num(vals[1]), num(vals[2])
	l.depths = depths.Val()
	return l, true, nil
}

// JobKeys lists every key of a job's frontier that may exist (derived from
// its metadata, no SCAN), the metadata hash first. A job without a frontier
// has none. rkeys' job hash is not included: rkeys owns it.
func (f *Frontier) JobKeys(ctx context.Context, ident string) ([]string, error) {
	if err := checkIdent(ident); err != nil {
		return nil, err
	}
	l, ok, err := f.readLayout(ctx, ident)
	if err != nil || !ok {
		return nil, err
	}
	var out []string
	for _, k := range scriptKeys {
		if k.name != "job" && !strings.HasSuffix(k.suffix, ":") {
			out = append(out, f.key(ident, k.name))
		}
	}
	buckets := (l.lastID + pagesPerBucket - 1) / pagesPerBucket
	for b := int64(0); b < buckets; b++ {
		s := strconv.FormatInt(b, 10)
		out = append(out, f.key(ident, "urls_p")+s, f.key(ident, "pages_p")+s, f.key(ident, "links_p")+s)
	}
	fpBuckets := (int64(1) << l.lhLevel) + l.split
	for b := int64(0); b < fpBuckets; b++ {
		out = append(out, f.key(ident, "fp_p")+strconv.FormatInt(b, 10))
	}
	for _, d := range l.depths {
		out = append(out, f.key(ident, "ready_p")+d)
	}
	return out, nil
}

// keyBatch is how many keys one Expire/Delete round trip handles.
const keyBatch = 500

// Expire sets ttl on every key of the job's frontier. The metadata hash is
// expired first, so a key a concurrent script creates afterwards inherits
// the TTL from it (every script does that for the keys it creates).
// It returns ErrNoFrontier when the job has none.
func (f *Frontier) Expire(ctx context.Context, ident string, ttl time.Duration) error {
	if err := checkIdent(ident); err != nil {
		return err
	}
	if ttl < time.Millisecond {
		return fmt.Errorf("expire frontier of job %s: ttl %s: %w: must be >= 1ms", ident, ttl, ErrInvalidArgument)
	}
	ok, err := f.rdb.PExpire(ctx, f.key(ident, "meta"), ttl).Result()
	if err != nil {
		return fmt.Errorf("expire frontier of job %s: %w", ident, err)
	}
	if !ok {
		return fmt.Errorf("expire frontier of job %s: %w", ident, ErrNoFrontier)
	}
	keys, err := f.JobKeys(ctx, ident)
	if err != nil {
		return fmt.Errorf("expire frontier of job %s: %w", ident, err)
	}
	for len(keys) > 0 {
		n := min(len(keys), keyBatch)
		_, err := f.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
			for _, k := range keys[:n] {
				p.PExpire(ctx, k, ttl)
			}
			return nil
		})
		if err != nil {
			return fmt.Errorf("expire frontier of job %s: %w", ident, err)
		}
		keys = keys[n:]
	}
	return nil
}

// Delete removes every key of the job's frontier, batch keys per round
// trip (UNLINK: Redis frees large values off the main thread). It first
// marks the frontier as being deleted, so every later write fails with
// ErrNoFrontier, and removes the metadata hash last, so an interrupted
// Delete can be repeated. Deleting a job without a frontier is a no-op.
func (f *Frontier) Delete(ctx context.Context, ident string, batch int) error {
	if err := checkIdent(ident); err != nil {
		return err
	}
	if batch < 1 {
		return fmt.Errorf("delete frontier of job %s: batch %d: %w: must be >= 1", ident, batch, ErrInvalidArgument)
	}
	if err := f.run(ctx, markDeletingScript, ident).Err(); err != nil {
		return fmt.Errorf("delete frontier of job %s: %w", ident, err)
	}
	keys, err := f.JobKeys(ctx, ident)
	if err != nil {
		return fmt.Errorf("delete frontier of job %s: %w", ident, err)
	}
	if len(keys) == 0 {
		return nil
	}
	rest := keys[1:] // keys[0] is the metadata hash: last
	for len(rest) > 0 {
		n := min(len(rest), batch)
		if err := f.rdb.Unlink(ctx, rest[:n]...).Err(); err != nil {
			return fmt.Errorf("delete frontier of job %s: %w", ident, err)
		}
		rest = rest[n:]
	}
	if err := f.rdb.Unlink(ctx, keys[0]).Err(); err != nil {
		return fmt.Errorf("delete frontier of job %s: %w", ident, err)
	}
	f.log.Info("frontier deleted", zap.String("ident", ident), zap.Int("keys", len(keys)))
	return nil
}

// markDeletingScript flags an existing frontier as being deleted.
var markDeletingScript = newScript(`
if redis.call('EXISTS', meta) == 1 then redis.call('HSET', meta, 'deleting', '1') end
return 0
`)
