package engine

import (
	"bytes"
	"cmp"
	"context"
	"maps"
	"os/exec"
	"slices"
	"strings"
	"time"

	"github.com/archiveflow/archiveflow/activities"
	"github.com/archiveflow/archiveflow/internal/hooks"
)

// Inventory is what this worker host would do with every plugin it finds,
// as a job without overrides would see it: `starter plugins` prints it.
type Inventory struct {
	Plugins []PluginReport `json:"plugins"`
	// Missing are the binaries some plugin needs and this host lacks, by
	// resolved name (the declared name when its template failed), sorted.
	Missing []string `json:"missing_binaries"`
}

// PluginReport is one plugin on this host.
type PluginReport struct {
	Name string `json:"name"`
	Dir  string `json:"dir"`
	// Status: "ok" (its hooks run), "cannot run" (a binary or required
	// plugin missing: Reason), "cannot be loaded" (a malformed config.json
	// or binaries.jsonl, an x-runtimes without archiveflow: Reason).
	Status   string         `json:"status"`
	Reason   string         `json:"reason,omitempty"`
	Requires []string       `json:"required_plugins,omitempty"`
	Binaries []BinaryReport `json:"binaries,omitempty"`
	Hooks    []HookReport   `json:"hooks"`
}

// Plugin statuses.
const (
	PluginOK          = "ok"
	PluginCannotRun   = "cannot run"
	PluginCannotLoad  = "cannot be loaded"
	HookRuns          = "runs"
	HookSkipped       = "skipped"
	HookDisabled      = "disabled"
	HookConfigInvalid = "configuration error"
	HookNotRun        = "not run"
)

// BinaryReport is one required binary looked up on this host.
type BinaryReport struct {
	Name       string `json:"name"`               // as declared, e.g. {NODE_BINARY}
	Resolved   string `json:"resolved,omitempty"` // after its templates, e.g. node
	Providers  string `json:"binproviders,omitempty"`
	MinVersion string `json:"min_version,omitempty"`
	Source     string `json:"source"`
	Path       string `json:"path,omitempty"`    // found here; "" when missing
	Version    string `json:"version,omitempty"` // the first line of PATH --version
	Missing    string `json:"missing,omitempty"` // why it is missing
	// NotChecked says why it was not looked up: only another provider
	// than env supplies it (a browser extension).
	NotChecked string `json:"not_checked,omitempty"`
}

// HookReport is one hook file of a plugin.
type HookReport struct {
	Name string `json:"name"`
	// Event is Snapshot or CrawlSetup, or the family archiveflow never
	// runs (Crawl, Install, ...).
	Event      string `json:"event"`
	Step       int    `json:"step"`
	Background bool   `json:"background,omitempty"`
	Status     string `json:"status"` // runs, skipped, disabled, configuration error, not run
	Reason     string `json:"reason,omitempty"`
	Warning    string `json:"warning,omitempty"`
}

// versionTimeout bounds one `BINARY --version`.
const versionTimeout = 5 * time.Second

// Inventory discovers every plugin as a job would on this host (snapshot
// and crawl setup hooks, through the one planning path), checks each
// plugin's required binaries on the hooks' PATH and asks the found ones
// their version.
func (e *Engine) Inventory(ctx context.Context) (Inventory, error) {
	reports := map[string]*PluginReport{}
	report := func(found hooks.Plan, name string) *PluginReport {
		r := reports[name]
		if r == nil {
			r = &PluginReport{Name: name, Dir: found.Dirs[name], Status: PluginOK, Hooks: []HookReport{}}
			if why := found.Installed[name]; why != "" {
				r.Status, r.Reason = PluginCannotLoad, why
			}
			reports[name] = r
		}
		return r
	}
	versions := map[string]string{}
	missing := map[string]bool{}
	var notRun hooks.Plan
	for _, event := range []string{hooks.EventSnapshot, hooks.EventCrawlSetup} {
		found, err := hooks.DiscoverEvent(e.cfg.PluginDirs, event, e.log)
		if err != nil {
			return Inventory{}, err
		}
		snapDir := e.crawlDir("inventory")
		resolved, _ := e.resolveAll(found, nil, snapDir)
		unmet := found.Unmet(resolved, e.hookPath())
		for i, h := range e.plan(found, nil, snapDir).Hooks { // a spec per found.Hooks[i]
			r := report(found, h.Plugin)
			hr := HookReport{Name: h.Name, Event: event, Step: h.Step, Background: h.Background, Warning: found.Hooks[i].Warning}
			hr.Status, hr.Reason = hookStatus(h)
			r.Hooks = append(r.Hooks, hr)
		}
		for _, plugin := range found.Plugins() {
			r := report(found, plugin)
			if why := unmet[plugin]; why != "" && r.Status == PluginOK {
				r.Status, r.Reason = PluginCannotRun, why
			}
			r.Requires = found.Schema(plugin).Requires
			if r.Binaries != nil {
				continue // checked for the other event
			}
			for _, c := range found.CheckBinaries(plugin, resolved[plugin], e.hookPath()) {
				b := BinaryReport{Name: c.Name, Resolved: c.Resolved, Providers: c.Providers, MinVersion: c.MinVersion,
					Source: c.Source, Path: c.Path, Missing: c.Problem, NotChecked: c.NotChecked}
				switch {
				case b.NotChecked != "":
				case b.Path != "":
					v, ok := versions[b.Path]
					if !ok {
						v = binaryVersion(ctx, b.Path)
						versions[b.Path] = v
					}
					b.Version = v
				default:
					missing[cmp.Or(b.Resolved, b.Name)] = true
				}
				r.Binaries = append(r.Binaries, b)
			}
		}
		if event == hooks.EventSnapshot {
			notRun = found // the families never run are the same for every event
		}
	}
	for _, h := range notRun.NotRun {
		r := report(notRun, h.Plugin)
		r.Hooks = append(r.Hooks, HookReport{Name: h.Name, Event: family(h.Name), Step: h.Step, Status: HookNotRun, Reason: h.Skip})
	}
	inv := Inventory{Plugins: make([]PluginReport, 0, len(reports)), Missing: []string{}}
	for _, name := range slices.Sorted(maps.Keys(reports)) {
		inv.Plugins = append(inv.Plugins, *reports[name])
	}
	inv.Missing = append(inv.Missing, slices.Sorted(maps.Keys(missing))...)
	return inv, nil
}

// hookStatus says whether a planned hook runs, and why not.
func hookStatus(h activities.HookSpec) (string, string) {
	switch {
	case h.SkipReason != "":
		return HookSkipped, h.SkipReason
	case !h.Enabled:
		return HookDisabled, "disabled by configuration (" + hooks.EnabledKey(h.Plugin) + ")"
	case h.ConfigError != "":
		return HookConfigInvalid, h.ConfigError
	}
	return HookRuns, ""
}

// family is the FAMILY of an on_FAMILY__ file name.
func family(name string) string {
	rest, _ := strings.CutPrefix(name, "on_")
	f, _, _ := strings.Cut(rest, "__")
	return f
}

// binaryVersion is the first line path --version prints, "" when it
// prints nothing within versionTimeout.
func binaryVersion(ctx context.Context, path string) string {
	ctx, cancel := context.WithTimeout(ctx, versionTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, path, "--version")
	cmd.WaitDelay = time.Second
	out, err := cmd.Output() // stdout: a wrapper script's chatter goes to stderr
	if err != nil {
		return "" // it does not take --version
	}
	for _, line := range bytes.Split(out, []byte("\n")) {
		if l := strings.TrimSpace(string(line)); l != "" {
			if len(l) > 120 {
				l = l[:120]
			}
			return l
		}
	}
	return ""
}
