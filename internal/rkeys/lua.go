package rkeys

import (
	"context"
	"fmt"
	"strconv"
	"strings"

	"github.com/redis/go-redis/v9"

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

// script is a Lua script with named KEYS: the Lua side reads each key as a
// local of its name, the Go side passes keys by name (Store.run builds
// KEYS in the declared order), so the two never disagree on a position. A
// script declared withStates also gets state_sets, the state:NAME set of
// every state of model.JobStates by state name, and move_to(ident, state),
// which puts ident in that state's set and takes it out of the others.
type script struct {
	keys   []string
	states bool
	lua    *redis.Script
}

// newScript declares a script reading keys (Lua identifiers) and body.
func newScript(keys []string, withStates bool, body string) *script {
	var b strings.Builder
	b.WriteString(luaPrelude)
	for i, k := range keys {
		fmt.Fprintf(&b, "local %s = KEYS[%d]\n", k, i+1)
	}
	if withStates {
		fmt.Fprintf(&b, `local state_sets = {}
for i, name in ipairs(STATES) do state_sets[name] = KEYS[%d + i] end
local function move_to(ident, state)
  for name, set in pairs(state_sets) do
    if name == state then redis.call('SADD', set, ident) else redis.call('SREM', set, ident) end
  end
end
`, len(keys))
	}
	// EXTRA holds the keys passed after the named ones (and the state
	// sets): a script over a variable number of keys (queues) reads them.
	n := len(keys)
	if withStates {
		n += len(model.JobStates)
	}
	fmt.Fprintf(&b, "local EXTRA = {}\nfor i = %d, #KEYS do EXTRA[#EXTRA + 1] = KEYS[i] end\n", n+1)
	b.WriteString(body)
	return &script{keys: keys, states: withStates, lua: redis.NewScript(b.String())}
}

// withStates marks a script that reads state_sets.
const withStates = true

// run runs sc with its keys given by name.
func (s *Store) run(ctx context.Context, sc *script, keys map[string]string, args ...any) *redis.Cmd {
	return s.runExtra(ctx, sc, keys, nil, args...)
}

// runExtra runs sc with its keys given by name and extra keys after them
// (the script's EXTRA table).
func (s *Store) runExtra(ctx context.Context, sc *script, keys map[string]string, extra []string, args ...any) *redis.Cmd {
	ks := make([]string, 0, len(sc.keys)+len(model.JobStates))
	for _, name := range sc.keys {
		k, ok := keys[name]
		if !ok {
			cmd := redis.NewCmd(ctx)
			cmd.SetErr(fmt.Errorf("script key %q: not given (a bug)", name))
			return cmd
		}
		ks = append(ks, k)
	}
	if sc.states {
		for _, st := range model.JobStates {
			ks = append(ks, s.keys.State(st))
		}
	}
	ks = append(ks, extra...)
	return sc.lua.Run(ctx, s.rdb, ks, args...)
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
