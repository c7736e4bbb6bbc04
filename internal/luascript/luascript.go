// Package luascript owns how archiveflow declares and runs its Redis Lua
// scripts, for every layout that has them (rkeys' job records, the
// frontier, fleet health, the host budget).
//
// A script names its KEYS: New binds each name to a Lua local of that name
// ahead of the layout's prelude and the script's body, and the Go side
// passes keys in that declared order (Run) or by name (RunNamed), so Go and
// Lua never disagree on a position. Keys passed after the named ones are
// the script's EXTRA table (scripts over a variable number of keys). The
// prelude is the layout's shared Lua — return codes, helpers — and may read
// the named keys.
//
// Pipeline sends many scripts' runs (each layout's op forms: Op) in one
// round trip, loading the scripts a restarted Redis forgot.
package luascript

import (
	"context"
	"fmt"
	"strings"
	"sync"

	"github.com/redis/go-redis/v9"
)

// Script is a Lua script with named KEYS.
type Script struct {
	keys []string
	src  string
	lua  *redis.Script
}

// New declares a script reading keys (Lua identifiers, in KEYS order),
// starting with prelude, then body.
func New(prelude string, keys []string, body string) *Script {
	var b strings.Builder
	for i, k := range keys {
		fmt.Fprintf(&b, "local %s = KEYS[%d]\n", k, i+1)
	}
	b.WriteString(prelude)
	fmt.Fprintf(&b, "\nlocal EXTRA = {}\nfor i = %d, #KEYS do EXTRA[#EXTRA + 1] = KEYS[i] end\n", len(keys)+1)
	b.WriteString(body)
	sc := &Script{keys: keys, src: b.String(), lua: redis.NewScript(b.String())}
	declared.Lock()
	declared.all = append(declared.all, sc)
	declared.Unlock()
	return sc
}

// declared are every script of the process, loaded again when a pipeline
// meets a Redis that does not know one (Pipeline).
var declared struct {
	sync.Mutex
	all []*Script
}

// Run runs the script with keys in the declared order, then extra keys,
// then args as ARGV.
func (s *Script) Run(ctx context.Context, c redis.Scripter, keys, extra []string, args ...any) *redis.Cmd {
	if len(keys) != len(s.keys) {
		return failed(ctx, fmt.Errorf("script keys %v: %d given (a bug)", s.keys, len(keys)))
	}
	return s.lua.Run(ctx, c, append(keys[:len(keys):len(keys)], extra...), args...)
}

// RunNamed runs the script with its keys given by name, then extra keys,
// then args as ARGV.
func (s *Script) RunNamed(ctx context.Context, c redis.Scripter, keys map[string]string, extra []string, args ...any) *redis.Cmd {
	ks := make([]string, 0, len(s.keys)+len(extra))
	for _, name := range s.keys {
		k, ok := keys[name]
		if !ok {
			return failed(ctx, fmt.Errorf("script key %q: not given (a bug)", name))
		}
		ks = append(ks, k)
	}
	return s.lua.Run(ctx, c, append(ks, extra...), args...)
}

func failed(ctx context.Context, err error) *redis.Cmd {
	cmd := redis.NewCmd(ctx)
	cmd.SetErr(err)
	return cmd
}

// Op sends one command (a script's Run, …) on c: a client (at once) or a
// pipeline (queued).
type Op func(c redis.Cmdable) redis.Cmder

// Pipeline sends ops in one round trip and returns their commands, in
// order, each with its own reply or error (the pipeline's error is not
// returned: the caller reads each command's). A script run in a pipeline
// cannot fall back from EVALSHA to EVAL as Run does, so the ops whose
// script Redis did not know (NOSCRIPT: a restarted Redis) did nothing:
// every declared script is loaded and those ops alone are sent again, in
// their order, in a second round trip.
func Pipeline(ctx context.Context, rdb redis.UniversalClient, ops []Op) []redis.Cmder {
	cmds := make([]redis.Cmder, len(ops))
	run := func(idx []int) {
		p := rdb.Pipeline()
		for _, i := range idx {
			cmds[i] = ops[i](p)
		}
		_, _ = p.Exec(ctx)
	}
	all := make([]int, len(ops))
	for i := range all {
		all[i] = i
	}
	run(all)
	var again []int
	for i, c := range cmds {
		if redis.HasErrorPrefix(c.Err(), "NOSCRIPT") {
			again = append(again, i)
		}
	}
	if len(again) == 0 {
		return cmds
	}
	if err := LoadAll(ctx, rdb); err != nil {
		return cmds
	}
	run(again)

	return cmds
}

// LoadAll loads every declared script into rdb's script cache, in one
// round trip.
func LoadAll(ctx context.Context, rdb redis.UniversalClient) error {
	declared.Lock()
	all := declared.all
	declared.Unlock()
	_, err := rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		for _, sc := range all {
			p.ScriptLoad(ctx, sc.src) // not lua.Load: it would keep a queued command's empty reply as its hash
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("load scripts: %w", err)
	}
	return nil
}
