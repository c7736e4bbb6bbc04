package frontier

import (
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// frontierKeys lists the keys that exist for the job's frontier (SCAN).
func frontierKeys(t *testing.T, e *env) []string {
	t.Helper()
	keys, err := e.rdb.Keys(ctxT(t), e.keys.Job(job)+"_frontier*").Result()
	require.NoError(t, err)
	sort.Strings(keys)
	return keys
}

// grow makes a frontier with every kind of key: two page buckets, several
// fingerprint buckets, claims, notes, ready queues at two depths,
// propagation left over.
func grow(t *testing.T, e *env, n int) {
	t.Helper()
	ctx := ctxT(t)
	seed(t, e, Config{MaxDepth: 3, MaxAttempts: 2})
	s := claimOne(t, e, "t")
	_, err := e.f.Discover(ctx, job, s.ID, s.Attempts, 0, links(numbered(u("/g/%d"), n)...))
	require.NoError(t, err)
	_, err = e.f.Complete(ctx, job, s.ID, s.Attempts, Outcome{Status: StatusSucceeded})
	require.NoError(t, err)
	a := claimOne(t, e, "ta")
	_, err = e.f.Discover(ctx, job, a.ID, a.Attempts, 0, links(u("/deeper")))
	require.NoError(t, err)
	_, err = e.f.Complete(ctx, job, a.ID, a.Attempts, Outcome{Status: StatusFailed, Note: "gone"})
	require.NoError(t, err)
	claimOne(t, e, "tb")
}

func TestJobKeysExpireDelete(t *testing.T) {
	e := newEnv(t, Options{})
	ctx := ctxT(t)
	require.NoError(t, e.rdb.HSet(ctx, e.keys.Job(job), "url", u("/")).Err()) // rkeys' job hash
	grow(t, e, 1200)
	existing := frontierKeys(t, e)
	listed, err := e.f.JobKeys(ctx, job)
	require.NoError(t, err)
	assert.Equal(t, e.f.key(job, "meta"), listed[0], "the metadata hash first")
	for _, k := range existing {
		assert.Contains(t, listed, k, "JobKeys lists every existing key")
	}
	assert.NotContains(t, listed, e.keys.Job(job), "the job hash belongs to rkeys")
	for _, want := range []string{"_frontier_pages:1", "_frontier_urls:1", "_frontier_fp:3", "_frontier_ready:1", "_frontier_ready:2", "_frontier_claims", "_frontier_notes"} {
		assert.Contains(t, existing, e.keys.Job(job)+want)
	}

	require.NoError(t, e.f.Expire(ctx, job, time.Hour))
	for _, k := range frontierKeys(t, e) {
		ttl, err := e.rdb.PTTL(ctx, k).Result()
		require.NoError(t, err)
		assert.Greater(t, ttl, 59*time.Minute, k)
	}
	ttl, err := e.rdb.TTL(ctx, e.keys.Job(job)).Result()
	require.NoError(t, err)
	assert.Equal(t, time.Duration(-1), ttl, "rkeys expires its own hash")
	// Keys created after Expire inherit the TTL.
	before := len(frontierKeys(t, e))
	p := claimOne(t, e, "late")
	_, err = e.f.Discover(ctx, job, p.ID, p.Attempts, 0, links(numbered(u("/late/%d"), 1000)...))
	require.NoError(t, err)
	after := frontierKeys(t, e)
	require.Greater(t, len(after), before, "new buckets were created")
	for _, k := range after {
		ttl, err := e.rdb.PTTL(ctx, k).Result()
		require.NoError(t, err)
		assert.Positive(t, ttl, k)
	}

	require.NoError(t, e.f.Delete(ctx, job, 3))
	assert.Empty(t, frontierKeys(t, e))
	n, err := e.rdb.Exists(ctx, e.keys.Job(job)).Result()
	require.NoError(t, err)
	assert.Equal(t, int64(1), n, "the job hash stays")
	require.NoError(t, e.f.Delete(ctx, job, 3), "deleting again is a no-op")
	_, err = e.f.Discover(ctx, job, p.ID, p.Attempts, 1, links(u("/x")))
	require.ErrorIs(t, err, ErrNoFrontier)
	require.ErrorIs(t, e.f.Delete(ctx, job, 0), ErrInvalidArgument)
	require.ErrorIs(t, e.f.Expire(ctx, job, 0), ErrInvalidArgument)
	// A fresh seed after the purge starts over.
	p1 := seed(t, e, Config{MaxDepth: 0, MaxAttempts: 1})
	assert.Equal(t, int64(1), p1.ID)
}

// A Delete interrupted after it marked the frontier leaves it refusing
// writes (no late retry recreates anything) and a second Delete finishes.
func TestDeleteInterrupted(t *testing.T) {
	e := newEnv(t, Options{})
	ctx := ctxT(t)
	grow(t, e, 10)
	require.NoError(t, e.f.run(ctx, markDeletingScript, job).Err())
	_, _, err := e.f.Claim(ctx, job, 1, "x", 0)
	require.ErrorIs(t, err, ErrNoFrontier)
	_, err = e.f.Seed(ctx, job, u("/"), Config{MaxDepth: 3, MaxAttempts: 2})
	require.ErrorIs(t, err, ErrNoFrontier)
	require.NoError(t, e.f.Delete(ctx, job, 100))
	assert.Empty(t, frontierKeys(t, e))
}

func TestSeedRefusesLeftoverKeys(t *testing.T) {
	e := newEnv(t, Options{})
	ctx := ctxT(t)
	require.NoError(t, e.rdb.RPush(ctx, e.f.key(job, "urls_p")+"0", "http://stale.example/").Err())
	_, err := e.f.Seed(ctx, job, u("/"), Config{MaxDepth: 3, MaxAttempts: 2})
	require.ErrorIs(t, err, ErrLeftoverKeys)
}

// Two URLs with the same fingerprint are two pages: a fingerprint hit is
// verified against the stored URL. SHA-256 prefixes do not collide on
// demand, so the test hands the script a forged fingerprint.
func TestFingerprintCollisionKeepsURLsApart(t *testing.T) {
	e, s := claimedSeed(t, Options{}, Config{MaxDepth: -1, MaxAttempts: 2})
	ctx := ctxT(t)
	forged := "\x00\x00\x00\x07abcd"
	discover := func(batch int, urls ...string) []any {
		args := []any{s.ID, s.Attempts, batch, 0, 1}
		for _, x := range urls {
			args = append(args, x, forged, 0)
		}
		v, err := e.f.run(ctx, discoverScript, job, args...).Result()
		require.NoError(t, err)
		return v.([]any)
	}
	res := discover(0, u("/one"), u("/two"))
	assert.Equal(t, int64(2), res[1], "two new pages")
	res = discover(1, u("/two"), u("/one"), u("/three"))
	assert.Equal(t, int64(1), res[1], "one new page")
	assert.Equal(t, int64(2), res[3], "two known")
	for i, x := range []string{u("/one"), u("/two"), u("/three")} {
		p, err := e.f.readPage(ctx, job, "page", "url", x, forged)
		require.NoError(t, err)
		assert.Equal(t, int64(i+2), p.ID)
		assert.Equal(t, x, p.URL)
	}
	collided, err := e.rdb.HGetAll(ctx, e.f.key(job, "fpx")).Result()
	require.NoError(t, err)
	assert.Equal(t, map[string]string{u("/two"): "3", u("/three"): "4"}, collided)
}

// The fingerprint table grows by linear hashing: buckets stay small enough
// for Redis' compact listpack encoding, and every URL stays findable.
func TestFingerprintTableSplits(t *testing.T) {
	e, s := claimedSeed(t, Options{}, Config{MaxDepth: -1, MaxAttempts: 2})
	ctx := ctxT(t)
	const n = 6000
	ls := numbered("https://www.example.org/articles/some-title-%d.html", n)
	_, err := e.f.Discover(ctx, job, s.ID, s.Attempts, 0, links(ls...))
	require.NoError(t, err)
	keys, err := e.rdb.Keys(ctx, e.f.key(job, "fp_p")+"*").Result()
	require.NoError(t, err)
	require.Greater(t, len(keys), (n+1)/lhLoad-2, "about one bucket per %d URLs", lhLoad)
	total := 0
	for _, k := range keys {
		size, err := e.rdb.HLen(ctx, k).Result()
		require.NoError(t, err)
		total += int(size)
		enc, err := e.rdb.ObjectEncoding(ctx, k).Result()
		require.NoError(t, err)
		assert.Equal(t, "listpack", enc, "%s holds %d entries", k, size)
	}
	assert.Equal(t, n+1, total, "every URL once")
	for i := 0; i < n; i += 97 {
		p, err := e.f.Page(ctx, job, ls[i])
		require.NoError(t, err)
		require.Equal(t, int64(i+2), p.ID)
	}
	res, err := e.f.Discover(ctx, job, s.ID, s.Attempts, 1, links(ls...))
	require.NoError(t, err)
	assert.Equal(t, n, res.Known, "every URL is found again")
	assert.True(t, strings.HasPrefix(keys[0], e.keys.Job(job)))
}
