package devserver

import (
	"errors"
	"fmt"
	"net"
	"path/filepath"
	"regexp"
	"strings"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
)

// Defaults applied by Start to zero-valued Options fields.
const (
	DefaultNamespace      = "default"
	DefaultIP             = "127.0.0.1"
	DefaultServerLogLevel = zapcore.WarnLevel

	// NoUI as Options.UIPort disables the Web UI.
	NoUI = -1

	// dbFileName is the SQLite database file inside Options.DataDir.
	dbFileName = "temporal.sqlite"
	// lockFileName guards Options.DataDir against a second server.
	lockFileName = "temporal.lock"
)

// Options configures an embedded dev server. The zero value is valid: an
// in-memory server for namespace "default" on 127.0.0.1 with a free
// frontend port and the Web UI on another free port.
type Options struct {
	// DataDir holds the SQLite database (temporal.sqlite) and its lock file.
	// It is created if missing. "" keeps everything in memory: the data is
	// lost when the process exits.
	DataDir string
	// Namespace is created before Start returns. Default "default".
	Namespace string
	// IP the frontend and the UI listen on. Default 127.0.0.1. "localhost"
	// is accepted as 127.0.0.1; an unspecified address (0.0.0.0, ::)
	// listens everywhere and is dialled as 127.0.0.1.
	IP string
	// FrontendPort is the gRPC port clients and workers dial. 0 picks a
	// free port.
	FrontendPort int
	// UIPort is the Web UI's HTTP port. 0 picks a free port; NoUI (-1)
	// disables the UI.
	UIPort int
	// Log receives the server's own log lines (and the dev server's). nil
	// discards them.
	Log *zap.Logger
	// ServerLogLevel is the minimum level of the Temporal server's log
	// lines passed to Log: "debug", "info", "warn", "error". "" means warn,
	// which keeps the server quiet.
	ServerLogLevel string
	// DynamicConfig overrides Temporal dynamic config keys (for example
	// "history.transferProcessorMaxPollRPS": 500). Keys are
	// case-insensitive and replace the tuned defaults of DefaultDynamicConfig.
	// Values must have the type of the setting (int, bool, string,
	// float64, time.Duration, ...).
	DynamicConfig map[string]any
}

// resolved is Options after defaults and validation.
type resolved struct {
	dataDir      string // absolute, "" = in-memory
	namespace    string
	bindIP       string // address the listeners bind to
	dialIP       string // address clients use to reach bindIP
	frontendPort int
	uiPort       int
	log          *zap.Logger
	serverLevel  zapcore.Level
	dynamic      map[string]any // lower-case keys
}

// namespacePattern is the namespace name rule: a letter or digit, then
// letters, digits, '.', '_' or '-', at most 255 characters in all.
var namespacePattern = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,254}$`)

// dynamicKeyPattern is the shape of a Temporal dynamic config key:
// dot-separated words, e.g. "history.transferProcessorMaxPollRPS".
var dynamicKeyPattern = regexp.MustCompile(`^[A-Za-z][A-Za-z0-9]*(\.[A-Za-z][A-Za-z0-9]*)+$`)

// resolve validates o and fills in defaults. Every error names the field,
// the value and the rule it breaks.
func (o Options) resolve() (resolved, error) {
	r := resolved{
		namespace:    o.Namespace,
		frontendPort: o.FrontendPort,
		uiPort:       o.UIPort,
		log:          o.Log,
	}
	var errs []error

	if r.namespace == "" {
		r.namespace = DefaultNamespace
	}
	if !namespacePattern.MatchString(r.namespace) {
		errs = append(errs, fmt.Errorf("namespace %q: must be 1-255 characters of letters, digits, '.', '_' or '-', starting with a letter or digit", r.namespace))
	}

	bindIP, dialIP, err := resolveIP(o.IP)
	if err != nil {
		errs = append(errs, err)
	}
	r.bindIP, r.dialIP = bindIP, dialIP

	if r.frontendPort < 0 || r.frontendPort > 65535 {
		errs = append(errs, fmt.Errorf("frontend port %d: must be 0 (pick a free port) or 1-65535", r.frontendPort))
	}
	if r.uiPort < NoUI || r.uiPort > 65535 {
		errs = append(errs, fmt.Errorf("UI port %d: must be -1 (no UI), 0 (pick a free port) or 1-65535", r.uiPort))
	}
	if r.uiPort > 0 && r.uiPort == r.frontendPort {
		errs = append(errs, fmt.Errorf("UI port %d: must differ from the frontend port", r.uiPort))
	}

	if o.DataDir != "" {
		abs, err := filepath.Abs(o.DataDir)
		if err != nil {
			errs = append(errs, fmt.Errorf("data dir %q: %w", o.DataDir, err))
		}
		if strings.ContainsAny(abs, "?#") {
			errs = append(errs, fmt.Errorf("data dir %q: must not contain '?' or '#' (the SQLite file is opened by URI)", o.DataDir))
		}
		r.dataDir = abs
	}

	r.serverLevel = DefaultServerLogLevel
	if o.ServerLogLevel != "" {
		lvl, err := zapcore.ParseLevel(o.ServerLogLevel)
		if err != nil {
			errs = append(errs, fmt.Errorf("server log level %q: must be one of debug, info, warn, error", o.ServerLogLevel))
		}
		r.serverLevel = lvl
	}

	dyn, err := mergeDynamicConfig(DefaultDynamicConfig(), o.DynamicConfig)
	if err != nil {
		errs = append(errs, err)
	}
	r.dynamic = dyn

	if r.log == nil {
		r.log = zap.NewNop()
	}
	if err := errors.Join(errs...); err != nil {
		return resolved{}, fmt.Errorf("invalid dev server options: %w", err)
	}
	return r, nil
}

// resolveIP returns the address to bind and the address to dial for ip.
func resolveIP(ip string) (bind, dial string, err error) {
	switch ip {
	case "":
		return DefaultIP, DefaultIP, nil
	case "localhost":
		return "127.0.0.1", "127.0.0.1", nil
	}
	parsed := net.ParseIP(ip)
	if parsed == nil {
		return "", "", fmt.Errorf("IP %q: must be an IPv4 or IPv6 address or \"localhost\"", ip)
	}
	if parsed.IsUnspecified() {
		return ip, "127.0.0.1", nil
	}
	return ip, ip, nil
}

// mergeDynamicConfig returns defaults with overrides applied, keyed by
// lower-case key (Temporal's keys are case-insensitive).
func mergeDynamicConfig(defaults, overrides map[string]any) (map[string]any, error) {
	out := make(map[string]any, len(defaults)+len(overrides))
	for k, v := range defaults {
		out[strings.ToLower(k)] = v
	}
	var errs []error
	for k, v := range overrides {
		if !dynamicKeyPattern.MatchString(k) {
			errs = append(errs, fmt.Errorf("dynamic config key %q: must be dot-separated words like \"history.transferProcessorMaxPollRPS\"", k))
			continue
		}
		if v == nil {
			errs = append(errs, fmt.Errorf("dynamic config key %q: value must not be nil", k))
			continue
		}
		out[strings.ToLower(k)] = v
	}
	return out, errors.Join(errs...)
}
