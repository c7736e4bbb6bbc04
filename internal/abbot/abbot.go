// Package abbot writes Redis the way ArchiveBot's bot does (lib/job.rb:
// register, queue, abort, set_delay, set_concurrency, ignore patterns,
// toggle_ignores), so tests and drills can drive archiveflow's ArchiveBot
// pipelines exactly as a real deployment's bot would, and reads a job's
// figures as the bot's `!status` does (status.go). It owns no part of
// archiveflow's layout: it writes only what the bot writes, un-namespaced,
// as the bot assumes full control of its database.
package abbot

import (
	"context"
	"fmt"
	"net/url"
	"path"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/archiveflow/archiveflow/internal/ident"
)

// Bot is ArchiveBot's bot on one Redis database.
type Bot struct {
	Redis redis.UniversalClient
}

// Job is one job the bot queued.
type Job struct {
	Ident string
	URL   string
}

// Options are the `!a`/`!ao` options the bot turns into queue and fields.
type Options struct {
	// Shallow queues with `!ao` (fetch_depth shallow, queue pending-ao).
	Shallow bool
	// Pipeline queues into pending:NAME (`--pipeline NAME`).
	Pipeline string
	// Large queues into pending-large (`--large`).
	Large bool
	// UserAgent is the resolved `--user-agent-alias`.
	UserAgent string
	// URLFile makes it a URL-list job (`!a <`).
	URLFile              bool
	StartedBy, StartedIn string
}

// Queue registers a job for rawURL and queues it as the bot does: the
// hash's fields, delay 250–375 ms and concurrency 3 (1 for ftp) set
// silently (settings_age bumped, nothing published), then the LPUSH and
// queued_at in one MULTI.
func (b Bot) Queue(ctx context.Context, rawURL string, o Options) (Job, error) {
	id, norm, err := ident.FromURL(rawURL)
	if err != nil {
		return Job{}, err
	}
	u, _ := url.Parse(norm)
	depth := "inf"
	if o.Shallow {
		depth = "shallow"
	}
	slug := u.Hostname() + "-" + depth
	if o.URLFile {
		slug = "urls-" + u.Hostname() + "-" + path.Base(u.Path) + "-" + depth
	}
	if o.StartedBy == "" {
		o.StartedBy = "archivist"
	}
	if o.StartedIn == "" {
		o.StartedIn = "#archivebot"
	}
	r := b.Redis
	if err := r.HSet(ctx, id, "url", norm, "fetch_depth", depth, "log_key", id+"_log", "user_agent", o.UserAgent,
		"ignore_patterns_set_key", id+"_ignores", "slug", slug, "started_by", o.StartedBy, "started_in", o.StartedIn).Err(); err != nil {
		return Job{}, err
	}
	if o.URLFile {
		if err := r.HSet(ctx, id, "url_file", norm).Err(); err != nil {
			return Job{}, err
		}
	}
	conc := 3
	if u.Scheme == "ftp" {
		conc = 1
	}
	if err := r.HSet(ctx, id, "delay_min", 250, "delay_max", 375).Err(); err != nil {
		return Job{}, err
	}
	r.HIncrBy(ctx, id, "settings_age", 1)
	if err := r.HSet(ctx, id, "concurrency", conc).Err(); err != nil {
		return Job{}, err
	}
	r.HIncrBy(ctx, id, "settings_age", 1)
	queue := "pending"
	switch {
	case o.Pipeline != "":
		queue = "pending:" + o.Pipeline
	case o.Shallow:
		queue = "pending-ao"
	case o.Large:
		queue = "pending-large"
	}
	_, err = r.TxPipelined(ctx, func(p redis.Pipeliner) error {
		p.LPush(ctx, queue, id)
		p.HSet(ctx, id, "queued_at", strconv.FormatInt(time.Now().Unix(), 10))
		return nil
	})
	if err != nil {
		return Job{}, fmt.Errorf("queue %s: %w", id, err)
	}
	return Job{Ident: id, URL: norm}, nil
}

// changed is the bot's job_parameters_changed: settings_age +1, published
// on archivebot:job:IDENT.
func (b Bot) changed(ctx context.Context, id string) error {
	age, err := b.Redis.HIncrBy(ctx, id, "settings_age", 1).Result()
	if err != nil {
		return err
	}
	return b.Redis.Publish(ctx, "archivebot:job:"+id, age).Err()
}

// Abort is `!abort IDENT`.
func (b Bot) Abort(ctx context.Context, id string) error {
	if err := b.Redis.HSet(ctx, id, "abort_requested", "true").Err(); err != nil {
		return err
	}
	return b.changed(ctx, id)
}

// SetConcurrency is `!con IDENT N`.
func (b Bot) SetConcurrency(ctx context.Context, id string, n int) error {
	if err := b.Redis.HSet(ctx, id, "concurrency", n).Err(); err != nil {
		return err
	}
	return b.changed(ctx, id)
}

// SetDelay is `!d IDENT MIN MAX` (milliseconds).
func (b Bot) SetDelay(ctx context.Context, id string, minMS, maxMS int) error {
	if err := b.Redis.HSet(ctx, id, "delay_min", minMS, "delay_max", maxMS).Err(); err != nil {
		return err
	}
	return b.changed(ctx, id)
}

// AddIgnore is `!ig IDENT PATTERN`.
func (b Bot) AddIgnore(ctx context.Context, id, pattern string) error {
	if err := b.Redis.SAdd(ctx, id+"_ignores", pattern).Err(); err != nil {
		return err
	}
	return b.changed(ctx, id)
}

// SuppressIgnoreReports is `!igoff IDENT` (true) / `!igon IDENT` (false).
func (b Bot) SuppressIgnoreReports(ctx context.Context, id string, on bool) error {
	var err error
	if on {
		err = b.Redis.HSet(ctx, id, "suppress_ignore_reports", "true").Err()
	} else {
		err = b.Redis.HDel(ctx, id, "suppress_ignore_reports").Err()
	}
	if err != nil {
		return err
	}
	return b.changed(ctx, id)
}
