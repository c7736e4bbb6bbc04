package rkeys

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/archiveflow/archiveflow/internal/model"
)

// A crawl's limits are job hash fields (absent when 0); a crawl finished
// at a limit is finished as any other (ArchiveBot's keys, jobs_completed)
// with the limit named in its hash and notification, until a retry
// reopens it.
func TestCrawlLimitsAndFinishLimited(t *testing.T) {
	e := newEnv(t, Options{})
	ctx := ctxT(t)
	j := testJob(t, "http://example.com/limited")
	j.Settings.MaxPages, j.Settings.MaxDuration = 100, 90*time.Second
	require.NoError(t, e.store.CreateJob(ctx, j))
	h := e.rdb.HGetAll(ctx, j.Ident).Val()
	assert.Equal(t, "100", h[FieldMaxPages])
	assert.Equal(t, "90", h[FieldMaxDuration])
	assert.NotContains(t, h, FieldMaxBytes, "an unset limit is absent")

	set := j.Settings
	set.MaxPages, set.MaxBytes = 0, 5<<20
	age, err := e.store.SetSettings(ctx, j.Ident, set)
	require.NoError(t, err)
	assert.Positive(t, age)
	v, err := e.store.GetJob(ctx, j.Ident)
	require.NoError(t, err)
	assert.Zero(t, v.Settings.MaxPages)
	assert.Equal(t, int64(5<<20), v.Settings.MaxBytes)
	assert.Equal(t, 90*time.Second, v.Settings.MaxDuration)
	set.MaxBytes = -1
	_, err = e.store.SetSettings(ctx, j.Ident, set)
	require.ErrorIs(t, err, ErrInvalid)

	require.NoError(t, e.store.SetState(ctx, j.Ident, model.StateActive))
	require.ErrorIs(t, e.store.FinishLimited(ctx, j.Ident, ""), ErrInvalid)
	twice(t, e, func() error { return e.store.FinishLimited(ctx, j.Ident, "page limit 100 reached") })
	v, err = e.store.GetJob(ctx, j.Ident)
	require.NoError(t, err)
	assert.Equal(t, model.StateFinished, v.State)
	assert.Equal(t, "page limit 100 reached", v.Limit)
	assert.False(t, v.Failed)
	assert.Equal(t, "1", e.rdb.Get(ctx, "jobs_completed").Val())
	assert.Equal(t, []string{j.Ident}, e.rdb.SMembers(ctx, "state:finished").Val())
	notes := e.rdb.LRange(ctx, "finish_notifications", 0, -1).Val()
	require.Len(t, notes, 1)
	var info map[string]any
	require.NoError(t, json.Unmarshal([]byte(notes[0]), &info))
	assert.Equal(t, "finished", info["state"])
	assert.Equal(t, "page limit 100 reached", info["limit"])
	assert.Equal(t, false, info["failed"])

	require.NoError(t, e.store.ReopenJob(ctx, j.Ident, Reopen{Op: "continue"}))
	v, err = e.store.GetJob(ctx, j.Ident)
	require.NoError(t, err)
	assert.Empty(t, v.Limit, "a reopened crawl is no longer at its limit")
}
