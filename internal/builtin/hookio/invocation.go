// Package hookio owns the hook side of archiveflow's hook contract
// (DESIGN.md §3): it parses a hook's argv and environment into an Invocation
// and writes the JSONL records (ArchiveResult, Snapshot, Tag, Response) a hook
// prints on stdout. It knows nothing about any particular plugin.
package hookio

import (
	"encoding/json"
	"fmt"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/archiveflow/archiveflow/config"
	"github.com/archiveflow/archiveflow/internal/egress"
	"github.com/archiveflow/archiveflow/internal/model"
)

// ExitSkipped is the exit code with which a hook reports `skipped` when it
// prints no ArchiveResult record.
const ExitSkipped = 10

// DefaultTimeout applies when neither <PLUGIN>_TIMEOUT nor TIMEOUT is set
// (a hook run by hand): the configured default, config hooks.timeout.
var DefaultTimeout = config.Default().Hooks.Timeout

// LookupEnv looks one environment variable up (os.LookupEnv in production).
type LookupEnv func(key string) (string, bool)

// Context is the decoded EXTRA_CONTEXT JSON object.
type Context struct {
	SnapshotID string `json:"snapshot_id,omitempty"`
	Ident      string `json:"ident,omitempty"`
	Plugin     string `json:"plugin,omitempty"`
	HookName   string `json:"hook_name,omitempty"`
	Attempt    int    `json:"attempt,omitempty"`
	Depth      int    `json:"depth,omitempty"`
}

// Invocation is everything the contract hands to one hook run.
type Invocation struct {
	Plugin         string        // plugin name, e.g. "wget"
	URL            string        // --url, validated as absolute http(s)
	SnapshotID     string        // --snapshot-id
	ExtraArgs      []string      // job-level extra args the hook did not recognise
	SnapDir        string        // SNAP_DIR (may be empty when run by hand)
	ArchiveDir     string        // ARCHIVE_DIR
	Timeout        time.Duration // <PLUGIN>_TIMEOUT, else TIMEOUT, else 60 s
	UserAgent      string        // USER_AGENT (may be empty)
	FetchDepth     string        // model.FetchShallow or model.FetchInf
	DelayMin       time.Duration // DELAY_MIN (milliseconds in the env)
	DelayMax       time.Duration // DELAY_MAX
	IgnorePatterns []string      // IGNORE_PATTERNS, each a valid RE2 pattern
	Extra          Context       // EXTRA_CONTEXT
	// FetchProxy is FETCH_PROXY, the runner's egress proxy that enforces
	// the fetch policy (nil: fetch directly). Every request goes through
	// it, loopback included.
	FetchProxy *url.URL

	env LookupEnv
}

// Parse builds the Invocation of plugin from its argv (without the program
// name) and environment. Bad input yields an error naming the argument or
// variable, its value and the rule it breaks.
func Parse(plugin string, args []string, env LookupEnv) (*Invocation, error) {
	inv := &Invocation{Plugin: plugin, env: env, FetchDepth: model.FetchShallow}
	if err := inv.parseArgs(args); err != nil {
		return nil, err
	}
	if err := inv.parseEnv(); err != nil {
		return nil, err
	}
	return inv, nil
}

func (inv *Invocation) parseArgs(args []string) error {
	for _, a := range args {
		switch {
		case strings.HasPrefix(a, "--url="):
			inv.URL = strings.TrimPrefix(a, "--url=")
		case strings.HasPrefix(a, "--snapshot-id="):
			inv.SnapshotID = strings.TrimPrefix(a, "--snapshot-id=")
		default:
			inv.ExtraArgs = append(inv.ExtraArgs, a)
		}
	}
	if inv.URL == "" {
		return fmt.Errorf("argument --url: missing: every hook needs --url=URL")
	}
	u, err := url.Parse(inv.URL)
	if err != nil {
		return fmt.Errorf("argument --url=%q: %w", inv.URL, err)
	}
	if (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return fmt.Errorf("argument --url=%q: must be an absolute http or https URL", inv.URL)
	}
	return nil
}

func (inv *Invocation) parseEnv() error {
	inv.SnapDir, _ = inv.env("SNAP_DIR")
	inv.ArchiveDir, _ = inv.env("ARCHIVE_DIR")
	inv.UserAgent, _ = inv.env("USER_AGENT")

	timeout, err := inv.timeout()
	if err != nil {
		return err
	}
	inv.Timeout = timeout

	if v, ok := inv.env("FETCH_DEPTH"); ok && v != "" {
		if err := model.ValidateFetchDepth(v); err != nil {
			return fmt.Errorf("env FETCH_DEPTH: %w", err)
		}
		inv.FetchDepth = v
	}
	if inv.DelayMin, err = inv.millis("DELAY_MIN"); err != nil {
		return err
	}
	if inv.DelayMax, err = inv.millis("DELAY_MAX"); err != nil {
		return err
	}
	if inv.DelayMax < inv.DelayMin {
		return fmt.Errorf("env DELAY_MAX=%d ms: must be >= DELAY_MIN (%d ms)",
			inv.DelayMax.Milliseconds(), inv.DelayMin.Milliseconds())
	}
	if inv.IgnorePatterns, err = inv.ignorePatterns(); err != nil {
		return err
	}
	if v, ok := inv.env(egress.EnvProxy); ok && v != "" {
		u, err := url.Parse(v)
		if err != nil || u.Scheme != "http" || u.Host == "" || u.Port() == "" {
			return fmt.Errorf("env %s=%q: must be http://HOST:PORT", egress.EnvProxy, v)
		}
		inv.FetchProxy = u
	}
	if v, ok := inv.env("EXTRA_CONTEXT"); ok && strings.TrimSpace(v) != "" {
		if err := json.Unmarshal([]byte(v), &inv.Extra); err != nil {
			return fmt.Errorf("env EXTRA_CONTEXT=%q: must be a JSON object: %w", v, err)
		}
	}
	return nil
}

func (inv *Invocation) timeout() (time.Duration, error) {
	for _, key := range []string{inv.Key("TIMEOUT"), "TIMEOUT"} {
		v, ok := inv.env(key)
		if !ok || v == "" {
			continue
		}
		n, err := strconv.Atoi(v)
		if err != nil || n <= 0 {
			return 0, fmt.Errorf("env %s=%q: must be a positive integer number of seconds", key, v)
		}
		return time.Duration(n) * time.Second, nil
	}
	return DefaultTimeout, nil
}

func (inv *Invocation) millis(key string) (time.Duration, error) {
	v, ok := inv.env(key)
	if !ok || v == "" {
		return 0, nil
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 0 {
		return 0, fmt.Errorf("env %s=%q: must be a non-negative integer number of milliseconds", key, v)
	}
	return time.Duration(n) * time.Millisecond, nil
}

func (inv *Invocation) ignorePatterns() ([]string, error) {
	v, ok := inv.env("IGNORE_PATTERNS")
	if !ok || strings.TrimSpace(v) == "" {
		return nil, nil
	}
	var pats []string
	if err := json.Unmarshal([]byte(v), &pats); err != nil {
		return nil, fmt.Errorf("env IGNORE_PATTERNS=%q: must be a JSON array of strings: %w", v, err)
	}
	for _, p := range pats {
		if err := model.ValidateIgnore(p); err != nil {
			return nil, fmt.Errorf("env IGNORE_PATTERNS: %w", err)
		}
	}
	return pats, nil
}

// Key returns the plugin-scoped config key: Key("TIMEOUT") on plugin "wget"
// is "WGET_TIMEOUT".
func (inv *Invocation) Key(suffix string) string {
	return strings.ToUpper(inv.Plugin) + "_" + suffix
}

// String returns the value of config key (e.g. "WGET_BINARY"), or def when
// it is unset or empty.
func (inv *Invocation) String(key, def string) string {
	if v, ok := inv.env(key); ok && v != "" {
		return v
	}
	return def
}

// Bool returns config key as a boolean. The runner exports booleans as
// True/False; true/false/1/0/yes/no are accepted too.
func (inv *Invocation) Bool(key string, def bool) (bool, error) {
	v, ok := inv.env(key)
	if !ok || v == "" {
		return def, nil
	}
	switch strings.ToLower(v) {
	case "true", "1", "yes", "on":
		return true, nil
	case "false", "0", "no", "off":
		return false, nil
	}
	return false, fmt.Errorf("env %s=%q: must be a boolean (True or False)", key, v)
}

// Int returns config key as an integer no smaller than min.
func (inv *Invocation) Int(key string, def, min int) (int, error) {
	v, ok := inv.env(key)
	if !ok || v == "" {
		return def, nil
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < min {
		return 0, fmt.Errorf("env %s=%q: must be an integer >= %d", key, v, min)
	}
	return n, nil
}

// StringList returns config key as a list of strings; the runner exports
// arrays as JSON.
func (inv *Invocation) StringList(key string) ([]string, error) {
	v, ok := inv.env(key)
	if !ok || strings.TrimSpace(v) == "" {
		return nil, nil
	}
	var out []string
	if err := json.Unmarshal([]byte(v), &out); err != nil {
		return nil, fmt.Errorf("env %s=%q: must be a JSON array of strings: %w", key, v, err)
	}
	return out, nil
}

// Enabled reports <PLUGIN>_ENABLED (default true).
func (inv *Invocation) Enabled() (bool, error) {
	return inv.Bool(inv.Key("ENABLED"), true)
}
