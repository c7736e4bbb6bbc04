package rkeys

import (
	"context"
	"fmt"
	"strconv"
	"strings"

	"github.com/redis/go-redis/v9"

	"github.com/archiveflow/archiveflow/internal/luascript"
	"github.com/archiveflow/archiveflow/internal/model"
)

// Script return codes; the Lua scripts return them under the names of the
// prelude (CODE_NOT_FOUND, ...).
const (
	codeNotFound = -1 // the job hash does not exist (never created or expired)
	codeFinal    = -2 // the job is in a final state; the write is refused
	codeRunning  = -3 // CreateJob: a job with this ident is running
	codeRetained = -4 // CreateJob: a finished job with this ident is retained
	codeNoop     = 0  // already applied (repeat) or nothing changed
	codeApplied  = 1  // applied
)

// luaPrelude starts every script: the return codes, the job states of
// model.JobStates (the only list of them) and the helpers the scripts share.
var luaPrelude = func() string {
	var b strings.Builder
	fmt.Fprintf(&b, "local CODE_NOT_FOUND, CODE_FINAL, CODE_RUNNING, CODE_RETAINED, CODE_NOOP, CODE_APPLIED = %d, %d, %d, %d, %d, %d\n",
		codeNotFound, codeFinal, codeRunning, codeRetained, codeNoop, codeApplied)
	var states, final []string
	for _, st := range model.JobStates {
		states = append(states, strconv.Quote(string(st)))
		if st.Final() {
			final = append(final, string(st)+" = true")
		}
	}
	fmt.Fprintf(&b, "local STATES = {%s}\nlocal FINAL = {%s}\n", strings.Join(states, ", "), strings.Join(final, ", "))
	b.WriteString(`local function is_final(s) return FINAL[s] == true end
local function inherit_ttl(job, k)
  local t = redis.call('PTTL', job)
  if t > 0 then redis.call('PEXPIRE', k, t) end
end
`)
	return b.String()
}()

// script is a Lua script of rkeys' layout (luascript: named KEYS, this
// prelude). A script declared withStates also gets state_sets, the
// state:NAME set of every state of model.JobStates by state name, and
// move_to(ident, state), which puts ident in that state's set and takes it
// out of the others; the sets are named keys state_NAME.
type script struct {
	states bool
	lua    *luascript.Script
}

// newScript declares a script reading keys (Lua identifiers) and body.
func newScript(keys []string, withStates bool, body string) *script {
	if !withStates {
		return &script{lua: luascript.New(luaPrelude, keys, body)}
	}
	keys = append(keys[:len(keys):len(keys)], stateKeys...)
	var b strings.Builder
	b.WriteString("local state_sets = {")
	for i, st := range model.JobStates {
		fmt.Fprintf(&b, "[%q] = %s, ", string(st), stateKeys[i])
	}
	b.WriteString(`}
local function move_to(ident, state)
  for name, set in pairs(state_sets) do
    if name == state then redis.call('SADD', set, ident) else redis.call('SREM', set, ident) end
  end
end
`)
	b.WriteString(body)
	return &script{states: true, lua: luascript.New(luaPrelude, keys, b.String())}
}

// stateKeys are the Lua names of the state:NAME sets, in model.JobStates'
// order.
var stateKeys = func() []string {
	out := make([]string, len(model.JobStates))
	for i, st := range model.JobStates {
		out[i] = "state_" + string(st)
	}
	return out
}()

// withStates marks a script that reads state_sets.
const withStates = true

// run runs sc with its keys given by name.
func (s *Store) run(ctx context.Context, sc *script, keys map[string]string, args ...any) *redis.Cmd {
	return s.runExtra(ctx, sc, keys, nil, args...)
}

// runExtra runs sc with its keys given by name and extra keys after them
// (the script's EXTRA table).
func (s *Store) runExtra(ctx context.Context, sc *script, keys map[string]string, extra []string, args ...any) *redis.Cmd {
	return s.runOn(ctx, s.rdb, sc, keys, extra, args...)
}

// runOn is runExtra on c: the client, or a pipeline (the ops of
// luascript.Pipeline).
func (s *Store) runOn(ctx context.Context, c redis.Scripter, sc *script, keys map[string]string, extra []string, args ...any) *redis.Cmd {
	if sc.states {
		named := make(map[string]string, len(keys)+len(model.JobStates))
		for k, v := range keys {
			named[k] = v
		}
		for i, st := range model.JobStates {
			named[stateKeys[i]] = s.keys.State(st)
		}
		keys = named
	}
	return sc.lua.RunNamed(ctx, c, keys, extra, args...)
}

// jobKeys are the named keys of one job that scripts read as job, log,
// ignores, ops and logbatches.
func (s *Store) jobKeys(ident string) map[string]string {
	return map[string]string{
		"job":        s.keys.Job(ident),
		"log":        s.keys.Log(ident),
		"ignores":    s.keys.Ignores(ident),
		"ops":        s.keys.Ops(ident),
		"logbatches": s.keys.LogBatches(ident),
		"rules":      s.keys.Rules(ident),
		"tags":       s.keys.Tags(ident),
	}
}

// Script is a Lua script of a package that owns a layout beside rkeys'
// (internal/fleethealth): the same prelude (return codes, inherit_ttl) and
// named KEYS as rkeys' own scripts, run through a Store (RunScript).
type Script struct{ sc *script }

// NewScript declares a script reading keys (Lua identifiers) and body.
func NewScript(keys []string, body string) *Script { return &Script{sc: newScript(keys, false, body)} }

// RunScript runs sc with its keys given by name and extra keys after them
// (the script's EXTRA table).
func (s *Store) RunScript(ctx context.Context, sc *Script, keys map[string]string, extra []string, args ...any) *redis.Cmd {
	return s.runExtra(ctx, sc.sc, keys, extra, args...)
}

// RunScriptOn is RunScript on c: the client, or a pipeline (the ops of
// luascript.Pipeline).
func (s *Store) RunScriptOn(ctx context.Context, c redis.Scripter, sc *Script, keys map[string]string, extra []string, args ...any) *redis.Cmd {
	return s.runOn(ctx, c, sc.sc, keys, extra, args...)
}

// The return codes a Script shares with rkeys' scripts (CODE_NOT_FOUND,
// CODE_NOOP, CODE_APPLIED in Lua).
const (
	CodeNotFound = codeNotFound
	CodeNoop     = codeNoop
	CodeApplied  = codeApplied
)

// Client is the Redis connection the Store writes through, for readers of
// a layout beside rkeys' (internal/fleethealth).
func (s *Store) Client() redis.UniversalClient { return s.rdb }
