package testredis

import (
	"context"
	"errors"
	"sync"

	"github.com/redis/go-redis/v9"
)

// ErrScriptsCut is the error of a script call CutScripts refuses.
var ErrScriptsCut = errors.New("testredis: redis went away (script call cut)")

// CutScripts is a go-redis hook (Client.AddHook) that lets After script
// calls (EVALSHA, EVAL) succeed and fails every later one with
// ErrScriptsCut without sending it: Redis gone between two of a
// multi-call write's calls. A NOSCRIPT reply (the script loaded by the
// EVAL that follows) does not count. After < 0: none is cut.
type CutScripts struct {
	mu    sync.Mutex
	After int
	n     int
}

// SetAfter changes After (e.g. -1: Redis is back).
func (c *CutScripts) SetAfter(n int) {
	c.mu.Lock()
	c.After = n
	c.mu.Unlock()
}

func (c *CutScripts) DialHook(next redis.DialHook) redis.DialHook { return next }

func (c *CutScripts) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if name := cmd.Name(); name != "evalsha" && name != "eval" {
			return next(ctx, cmd)
		}
		c.mu.Lock()
		cut := c.After >= 0 && c.n >= c.After
		c.mu.Unlock()
		if cut {
			return ErrScriptsCut
		}
		err := next(ctx, cmd)
		if err == nil {
			c.mu.Lock()
			c.n++
			c.mu.Unlock()
		}
		return err
	}
}

func (c *CutScripts) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}
