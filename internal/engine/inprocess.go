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

// wrappers are the wrapper scripts read so far: the built-in each runs
// ("": none).
var wrappers fileCache[string]

// wrapperOf returns the built-in hook name of a wrapper script.
func wrapperOf(path string) (string, bool) {
	info, err := os.Stat(path)
	if err != nil || !info.Mode().IsRegular() || info.Size() > 4096 {
		return "", false
	}
	name, err := wrappers.get(path, info, func() (string, error) {
		data, err := os.ReadFile(path)
		return parseWrapper(data), err
	})
	return name, err == nil && name != ""
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

// fileCache keeps what was read from files by key, read again when a
// file's size or modification time changes: every page resolves every
// page hook's configuration and wrapper.
type fileCache[V any] struct {
	mu sync.Mutex
	m  map[string]fileEntry[V]
}

type fileEntry[V any] struct {
	mod  time.Time
	size int64
	v    V
}

// get is key's value for the file info describes, load's when it changed.
func (c *fileCache[V]) get(key string, info os.FileInfo, load func() (V, error)) (V, error) {
	c.mu.Lock()
	e, ok := c.m[key]
	c.mu.Unlock()
	if ok && e.mod.Equal(info.ModTime()) && e.size == info.Size() {
		return e.v, nil
	}
	v, err := load()
	if err != nil {
		return v, err
	}
	c.mu.Lock()
	if c.m == nil {
		c.m = map[string]fileEntry[V]{}
	}
	c.m[key] = fileEntry[V]{mod: info.ModTime(), size: info.Size(), v: v}
	c.mu.Unlock()
	return v, nil
}

// schema loads a plugin's config.json through the cache (Engine.schemas).
func (e *Engine) schema(path, plugin string) (*hooks.Schema, error) {
	info, err := os.Stat(path)
	if err != nil {
		// A plugin without config.json: LoadSchema decides what that means.
		return hooks.LoadSchema(path, plugin)
	}
	return e.schemas.get(plugin+"\x00"+path, info, func() (*hooks.Schema, error) { return hooks.LoadSchema(path, plugin) })
}
