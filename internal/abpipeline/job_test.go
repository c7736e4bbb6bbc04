package abpipeline

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/archiveflow/archiveflow/config"
	"github.com/archiveflow/archiveflow/internal/model"
	"github.com/archiveflow/archiveflow/internal/rkeys"
	"github.com/archiveflow/archiveflow/internal/submit"
)

func TestCandidateQueuesFollowArchiveBot(t *testing.T) {
	named := []string{"pending:box", "pending:other", "pending:ox"}
	for _, c := range []struct {
		name          string
		aoOnly, large bool
		want          []string
	}{
		{"default", false, false, []string{"pending:box", "pending:ox", "pending", "pending-ao"}},
		{"large", false, true, []string{"pending:box", "pending:ox", "pending-large", "pending", "pending-ao"}},
		{"ao only", true, false, []string{"pending-ao"}},
		{"ao only and large", true, true, []string{"pending-ao", "pending-large"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			// pending:NAME applies when NAME is part of the nickname.
			assert.Equal(t, c.want, CandidateQueues(named, "mybox", c.aoOnly, c.large))
		})
	}
}

func botView(raw map[string]string, ignores ...string) rkeys.JobView {
	v := rkeys.JobView{Ident: "id1", URL: raw["url"], FetchDepth: raw["fetch_depth"], StartedBy: "alice", Raw: raw}
	v.Settings.UserAgent = raw["user_agent"]
	v.Settings.Ignores = ignores
	return v
}

func TestJobFromViewReadsTheBotsHash(t *testing.T) {
	raw := map[string]string{"url": "https://example.com/", "fetch_depth": "shallow", "concurrency": "3",
		"user_agent": "UA", "claim_queue": "pending-ao", "url_file": ""}
	v := botView(raw, `\.gif$`, `(?<=x)y`, `^a`)
	v.Settings.Concurrency, v.Settings.DelayMinMS, v.Settings.DelayMaxMS = 3, 250, 375
	v.Settings.SuppressIgnoreReports = true
	v.SettingsAge = 7
	j, notes, err := JobFromView(v)
	require.NoError(t, err)
	assert.Equal(t, model.Settings{Concurrency: 3, DelayMinMS: 250, DelayMaxMS: 375, UserAgent: "UA",
		Ignores: []string{`\.gif$`, `^a`}, UnappliedIgnores: []string{`(?<=x)y`}, SuppressIgnoreReports: true,
		BotOwned: true, BotAge: 7}, j.Settings, "read at the hash's settings_age")
	assert.Equal(t, "pending-ao", j.Queue)
	require.Len(t, notes, 1)
	assert.Contains(t, notes[0], "lookbehind")

	delete(raw, "concurrency")
	j, _, err = JobFromView(botView(raw))
	require.NoError(t, err)
	assert.Equal(t, 1, j.Settings.Concurrency, "a missing concurrency is ArchiveBot's 1")

	_, _, err = JobFromView(botView(map[string]string{"url": "https://example.com/", "fetch_depth": "7"}))
	require.ErrorIs(t, err, ErrBadJob)
	assert.Contains(t, err.Error(), `fetch_depth "7"`)
	_, _, err = JobFromView(botView(map[string]string{"fetch_depth": "inf"}))
	require.ErrorIs(t, err, ErrBadJob)
}

func TestSameSettingsComparesIgnoresAsSets(t *testing.T) {
	a := model.Settings{Concurrency: 2, Ignores: []string{"b", "a"}}
	b := model.Settings{Concurrency: 2, Ignores: []string{"a", "b"}}
	assert.True(t, SameSettings(a, b))
	b.Concurrency = 3
	assert.False(t, SameSettings(a, b))
	c := model.Settings{Concurrency: 2, Ignores: []string{"a", "b"}, SuppressIgnoreReports: true}
	assert.False(t, SameSettings(a, c))
}

// TestBotJobsIgnoreRobots: an ArchiveBot job keeps the bot's behaviour
// (robots.txt ignored) whatever config crawl.robots says.
func TestBotJobsIgnoreRobots(t *testing.T) {
	cfg := config.Default()
	cfg.Crawl.Robots = model.RobotsObey
	r := Request(Job{Ident: "abc", URL: "http://x/", FetchDepth: model.FetchInf, Settings: model.Settings{Concurrency: 1}}, cfg.Pools[0])
	assert.Equal(t, model.RobotsIgnore, r.Robots)
	assert.False(t, submit.CrawlInput(&cfg, r).Crawl.ObeysRobots())
}

// A bot job's nice (set with `starter set IDENT nice=N` while it waited in
// the bot's queue; absent in the bot's own hash) is its workflow's
// priority when a pipeline starts it; a nice out of range is a bad job.
func TestBotJobStartsWithItsNice(t *testing.T) {
	cfg := config.Default()
	v := botView(map[string]string{"url": "https://example.com/", "fetch_depth": "shallow", "concurrency": "1"})
	j, _, err := JobFromView(v)
	require.NoError(t, err)
	r := Request(j, cfg.Pools[0])
	assert.Equal(t, 0, r.Nice)
	assert.Equal(t, 3, r.PriorityKey, "nice 0: Temporal's default priority")
	assert.Equal(t, 3, submit.StartOptions(r).Priority.PriorityKey)

	v.Nice = -10
	j, _, err = JobFromView(v)
	require.NoError(t, err)
	r = Request(j, cfg.Pools[0])
	assert.Equal(t, -10, submit.Job(r).Nice, "the hash keeps it")
	assert.Equal(t, 1, submit.StartOptions(r).Priority.PriorityKey)

	v.Nice = 40
	_, _, err = JobFromView(v)
	require.ErrorIs(t, err, ErrBadJob)
	assert.Contains(t, err.Error(), "nice 40: must be between -20 and 19")
}

// A job claimed from pending:NAME runs on the queue of the claiming
// pool's nickname tag (the pool's workers serve it), a job from another
// queue on the pool's queue.
func TestNamedQueueJobsAreTagged(t *testing.T) {
	cfg := config.Default()
	pool := config.Pool{Name: "ab", TaskQueue: "abq", Slots: 1, ArchiveBot: &config.ArchiveBotPool{Nickname: "mybox"}}
	r := &TemporalRunner{Config: &cfg, Pool: pool}
	j := Job{Ident: "x", URL: "https://example.com/", FetchDepth: "shallow", Queue: "pending:box"}
	assert.Equal(t, "abq#mybox", r.request(j).Queue())
	j.Queue = "pending"
	assert.Equal(t, "abq", r.request(j).Queue())
	assert.Empty(t, NamedTag(&cfg, config.Pool{Name: "plain", TaskQueue: "q"}), "not an ArchiveBot pool")
}
