package frontier

import (
	"context"
	"errors"
	"fmt"

	"github.com/redis/go-redis/v9"
)

// Robots returns what the crawl keeps for origin's robots.txt (an opaque
// value, internal/robots' Record as JSON; KeepRobots); ok false when
// nothing is kept yet.
func (f *Frontier) Robots(ctx context.Context, ident, origin string) (value string, ok bool, err error) {
	if err := checkIdent(ident); err != nil {
		return "", false, err
	}
	v, err := f.rdb.HGet(ctx, f.key(ident, "robots"), origin).Result()
	if errors.Is(err, redis.Nil) {
		return "", false, nil
	}
	if err != nil {
		return "", false, fmt.Errorf("read robots.txt of %s for job %s: %w", origin, ident, err)
	}
	return v, true, nil
}

// KeepRobots keeps value for origin's robots.txt unless the crawl keeps
// one already (two workers fetched it at once: the first kept wins), and
// returns the value kept. The hash lives with the frontier: it takes the
// frontier's TTL, is expired and deleted with it (JobKeys).
func (f *Frontier) KeepRobots(ctx context.Context, ident, origin, value string) (string, error) {
	if err := checkIdent(ident); err != nil {
		return "", err
	}
	if origin == "" || value == "" {
		return "", fmt.Errorf("keep robots.txt for job %s: %w: origin and value must not be empty", ident, ErrInvalidArgument)
	}
	v, err := f.run(ctx, keepRobotsScript, ident, origin, value).Result()
	if err != nil {
		return "", fmt.Errorf("keep robots.txt of %s for job %s: %w", origin, ident, err)
	}
	code, rest, err := replyCode(v)
	if err != nil {
		return "", fmt.Errorf("keep robots.txt of %s for job %s: %w", origin, ident, err)
	}
	switch code {
	case retApplied:
		kept, _ := rest[0].(string)
		return kept, nil
	case retNoFrontier:
		return "", fmt.Errorf("keep robots.txt of %s for job %s: %w", origin, ident, ErrNoFrontier)
	default:
		return "", fmt.Errorf("keep robots.txt of %s for job %s: unexpected reply code %d", origin, ident, code)
	}
}

// keepRobotsScript keeps a robots.txt record once. ARGV: origin value.
var keepRobotsScript = newScript(`
if not load_meta() then return {NO_FRONTIER} end
redis.call('HSETNX', robots, ARGV[1], ARGV[2])
touch(robots)
finish()
return {APPLIED, redis.call('HGET', robots, ARGV[1])}
`)
