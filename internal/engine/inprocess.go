package engine

import (
	"bytes"
	"context"
	"io"
	"os"
	"regexp"
	"strings"
	"sync"
	"time"

	"github.com/archiveflow/archiveflow/internal/builtin"
	"github.com/archiveflow/archiveflow/internal/hooks"
	"github.com/archiveflow/archiveflow/internal/procs"
)

// wrapperLine is the one command of a built-in hook's wrapper script
// (plugins/*/on_Snapshot__NN_NAME.sh): exec the archiveflow binary's hook
// NAME with the hook's arguments.
var wrapperLine = regexp.MustCompile(`^exec "\$\{ARCHIVEFLOW_BIN:-archiveflow\}" hook ([a-z0-9]+) "\$@"$`)

// inProcess reports the built-in hook a hook file runs, when running it
// inside this process is allowed (Config.InProcessBuiltins) and changes
// nothing but the cost: the file is exactly a built-in wrapper (a shebang,
// comments and that exec line) of a hook that starts no process. A
// replaced or edited plugin runs as its own process.
func (e *Engine) inProcess(path string) (string, bool) {
	if !e.cfg.InProcessBuiltins {
		return "", false
	}
	name, ok := wrapperOf(path)
	return name, ok && builtin.InProcess(name)
}

var wrappers = struct {
	sync.Mutex
	m map[string]wrapperEntry
}{m: map[string]wrapperEntry{}}

type wrapperEntry struct {
	mod  time.Time
	size int64
	name string
}

// wrapperOf returns the built-in hook name of a wrapper script (cached by
// path, size and modification time).
func wrapperOf(path string) (string, bool) {
	info, err := os.Stat(path)
	if err != nil || !info.Mode().IsRegular() || info.Size() > 4096 {
		return "", false
	}
	wrappers.Lock()
	c, ok := wrappers.m[path]
	wrappers.Unlock()
	if ok && c.mod.Equal(info.ModTime()) && c.size == info.Size() {
		return c.name, c.name != ""
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return "", false
	}
	name := parseWrapper(data)
	wrappers.Lock()
	wrappers.m[path] = wrapperEntry{mod: info.ModTime(), size: info.Size(), name: name}
	wrappers.Unlock()
	return name, name != ""
}

func parseWrapper(data []byte) string {
	name := ""
	for i, line := range strings.Split(string(bytes.TrimSpace(data)), "\n") {
		line = strings.TrimSpace(line)
		switch {
		case i == 0 && line != "#!/bin/sh":
			return ""
		case line == "" || strings.HasPrefix(line, "#"):
		case name == "":
			m := wrapperLine.FindStringSubmatch(line)
			if m == nil {
				return ""
			}
			name = m[1]
		default:
			return "" // anything after the exec
		}
	}
	return name
}

// inProcessFunc calls built-in hook name as its wrapper would, with the
// spec's arguments and environment, in the spec's directory.
func inProcessFunc(name string, spec procs.Spec) procs.Func {
	env := make(map[string]string, len(spec.Env))
	for _, kv := range spec.Env {
		if k, v, ok := strings.Cut(kv, "="); ok {
			env[k] = v
		}
	}
	args := append([]string{name}, spec.Args...)
	return func(ctx context.Context, dir string, stdout, stderr io.Writer) int {
		return builtin.RunIn(ctx, dir, args, func(k string) (string, bool) { v, ok := env[k]; return v, ok }, stdout, stderr)
	}
}

// schemaCache keeps plugin schemas (config.json) by path, reloaded when
// the file changes: every page resolves every page hook's configuration.
type schemaCache struct {
	mu sync.Mutex
	m  map[string]schemaEntry
}

type schemaEntry struct {
	mod    time.Time
	size   int64
	schema *hooks.Schema
}

// schema loads a plugin's config.json through the cache.
func (e *Engine) schema(path, plugin string) (*hooks.Schema, error) {
	info, err := os.Stat(path)
	if err != nil {
		// A plugin without config.json: LoadSchema decides what that means.
		return hooks.LoadSchema(path, plugin)
	}
	key := plugin + "\x00" + path
	e.schemas.mu.Lock()
	c, ok := e.schemas.m[key]
	e.schemas.mu.Unlock()
	if ok && c.mod.Equal(info.ModTime()) && c.size == info.Size() {
		return c.schema, nil
	}
	s, err := hooks.LoadSchema(path, plugin)
	if err != nil {
		return nil, err
	}
	e.schemas.mu.Lock()
	e.schemas.m[key] = schemaEntry{mod: info.ModTime(), size: info.Size(), schema: s}
	e.schemas.mu.Unlock()
	return s, nil
}
