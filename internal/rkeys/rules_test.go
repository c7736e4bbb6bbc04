package rkeys

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestCrawlRulesAndLiveSettings(t *testing.T) {
	e := newEnv(t, Options{})
	ctx := ctxT(t)
	j := testJob(t, "http://example.com/")
	_, err := e.store.CrawlLive(ctx, j.Ident)
	require.ErrorIs(t, err, ErrJobNotFound)
	require.ErrorIs(t, e.store.SetRules(ctx, j.Ident, 1, `[]`), ErrJobNotFound, "rules never create a job")
	require.NoError(t, e.store.CreateJob(ctx, j))

	live, err := e.store.CrawlLive(ctx, j.Ident)
	require.NoError(t, err)
	assert.ElementsMatch(t, j.Settings.Ignores, live.Ignores)
	assert.False(t, live.SuppressIgnoreReports)
	assert.Equal(t, int64(-1), live.RulesVersion, "no rules stored")

	twice(t, e, func() error { return e.store.SetRules(ctx, j.Ident, 2, `[{"pattern":"b","skip":true}]`) })
	require.NoError(t, e.store.SetRules(ctx, j.Ident, 1, `[{"pattern":"a","skip":true}]`))
	require.NoError(t, e.rdb.HSet(ctx, e.store.Keys().Job(j.Ident), "suppress_ignore_reports", "true").Err())
	live, err = e.store.CrawlLive(ctx, j.Ident)
	require.NoError(t, err)
	assert.Equal(t, int64(2), live.RulesVersion, "an older version never replaces the latest")
	assert.Equal(t, `[{"pattern":"b","skip":true}]`, live.RulesJSON)
	assert.True(t, live.SuppressIgnoreReports)
	old, err := e.rdb.HGet(ctx, e.store.Keys().Rules(j.Ident), "1").Result()
	require.NoError(t, err)
	assert.Equal(t, `[{"pattern":"a","skip":true}]`, old, "old versions stay with the attempts that used them")

	require.NoError(t, e.store.Finish(ctx, j.Ident, "finished"))
	ttl, err := e.rdb.TTL(ctx, e.store.Keys().Rules(j.Ident)).Result()
	require.NoError(t, err)
	assert.Positive(t, ttl, "IDENT_rules expires with the job")
}
