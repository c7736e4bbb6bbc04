package hooks

import (
	"errors"
	"fmt"
	"strings"
)

// ErrNotAHook reports a file that is not an on_Snapshot hook at all
// (config.json, README.md, helper scripts, on_Crawl__/on_Install__ hooks).
// Discovery ignores such files silently. It is distinct from *NameError,
// which reports a file that claims to be an on_Snapshot hook but breaks the
// grammar.
var ErrNotAHook = errors.New("not an on_Snapshot hook")

// UnnumberedNN is the NN given to hooks without an __NN_ prefix. It is
// larger than every two-digit NN, so unnumbered hooks run in step 9 after
// every numbered 9x hook, ordered among themselves by file name.
const UnnumberedNN = 100

// Events are the hook families archiveflow runs: on_Snapshot__ hooks per
// snapshot (and crawl page), on_CrawlSetup__ hooks once per crawl and host
// before its first page (ArchiveBox's abx-plugins use them to start a
// shared browser daemon). Both follow the same name grammar.
const (
	EventSnapshot   = "Snapshot"
	EventCrawlSetup = "CrawlSetup"
)

// Name markers between the description and the extension.
const (
	markerBackground = "bg"
	markerFinite     = "finite"
	markerDaemon     = "daemon"
)

// NameError reports a file name that starts like an on_Snapshot hook but
// breaks the grammar on_Snapshot__NN_desc[.finite|.daemon][.bg].ext.
type NameError struct {
	Name string // the file name
	Rule string // the rule it breaks
}

func (e *NameError) Error() string {
	return fmt.Sprintf("hook file name %q: %s", e.Name, e.Rule)
}

// Name is a parsed hook file name.
type Name struct {
	File       string // the full file name, e.g. on_Snapshot__61_wget.finite.bg.sh
	Stem       string // File without its final extension: on_Snapshot__61_wget.finite.bg
	Desc       string // the description: wget
	Ext        string // the final extension without its dot: sh
	NN         int    // 00..99, or UnnumberedNN
	Step       int    // first digit of NN; 9 for unnumbered hooks
	Numbered   bool   // false when the name has no __NN_ prefix
	Background bool   // the name has a .bg. marker
	Finite     bool   // the name has a .finite. marker (informational)
	Daemon     bool   // the name has a .daemon. marker: see UntilSeal
}

// UntilSeal reports whether a background hook runs until the seal (or its
// crawl's teardown) rather than under its plugin's timeout: its name says
// .daemon.bg, as abx-plugins name the hooks that hold a session later hooks
// use (chrome launch and tab, headers). Every other background hook gets
// its <PLUGIN>_TIMEOUT as a run-time limit, as a foreground hook does.
func (n Name) UntilSeal() bool { return n.Background && n.Daemon }

// HookUntilSeal is UntilSeal for a hook file name of either event; a name
// that does not parse runs under its timeout.
func HookUntilSeal(file string) bool {
	for _, event := range []string{EventSnapshot, EventCrawlSetup} {
		if n, err := ParseEventName(event, file); err == nil {
			return n.UntilSeal()
		}
	}
	return false
}

// ParseName parses a hook file name (a base name, not a path).
//
// Grammar: on_Snapshot__NN_desc[.finite|.daemon][.bg].ext where NN is
// exactly two digits, desc is one or more of [A-Za-z0-9_-], the markers may
// appear in any order but each at most once (and not both .finite and
// .daemon), and ext is one or more of [A-Za-z0-9]. A name without NN
// (on_Snapshot__desc.ext) is valid but unnumbered: step 9, NN UnnumberedNN.
//
// Names that are not on_Snapshot hooks return an error wrapping ErrNotAHook;
// grammar violations return a *NameError naming the file and the rule.
func ParseName(name string) (Name, error) {
	return ParseEventName(EventSnapshot, name)
}

// ParseEventName is ParseName for the hooks of event (EventSnapshot or
// EventCrawlSetup): on_EVENT__NN_desc[.finite|.daemon][.bg].ext. A file of
// another event wraps ErrNotAHook.
func ParseEventName(event, name string) (Name, error) {
	body, err := eventBody(event, name)
	if err != nil {
		return Name{}, err
	}
	bad := func(format string, args ...any) (Name, error) {
		return Name{}, &NameError{Name: name, Rule: fmt.Sprintf(format, args...)}
	}
	dot := strings.IndexByte(body, '.')
	if dot < 0 {
		return bad("no extension: want on_%s__NN_desc.ext", event)
	}
	head, tail := body[:dot], body[dot+1:]
	segments := strings.Split(tail, ".")
	n := Name{File: name, Ext: segments[len(segments)-1]}
	if n.Ext == "" {
		return bad("empty extension after the final dot")
	}
	if c, ok := firstOutside(n.Ext, isAlnum); ok {
		return bad("extension %q has character %q: only letters and digits are allowed", n.Ext, c)
	}
	n.Stem = strings.TrimSuffix(name, "."+n.Ext)
	if err := n.setMarkers(segments[:len(segments)-1]); err != nil {
		return bad("%s", err)
	}
	if err := n.setOrder(head); err != nil {
		return bad("%s", err)
	}
	return n, nil
}

// eventBody checks the on_EVENT__ prefix and returns what follows it.
func eventBody(event, name string) (string, error) {
	prefix := "on_" + event
	rest, ok := strings.CutPrefix(name, prefix)
	if !ok {
		return "", fmt.Errorf("%q: %w", name, ErrNotAHook)
	}
	if rest != "" && isAlnum(rune(rest[0])) {
		// on_SnapshotSetup__..., another event family.
		return "", fmt.Errorf("%q: %w", name, ErrNotAHook)
	}
	body, ok := strings.CutPrefix(rest, "__")
	if !ok {
		return "", &NameError{Name: name, Rule: prefix + " must be followed by a double underscore: want " + prefix + "__NN_desc.ext"}
	}
	return body, nil
}

// setMarkers records the .finite/.daemon/.bg markers between desc and ext.
func (n *Name) setMarkers(markers []string) error {
	seen := make(map[string]bool, len(markers))
	for _, m := range markers {
		switch m {
		case markerBackground, markerFinite, markerDaemon:
		case "":
			return errors.New("empty marker (two dots in a row)")
		default:
			return fmt.Errorf("unknown marker %q: only .finite, .daemon and .bg may stand between the description and the extension", m)
		}
		if seen[m] {
			return fmt.Errorf("marker .%s appears twice", m)
		}
		seen[m] = true
	}
	if seen[markerFinite] && seen[markerDaemon] {
		return errors.New("a hook cannot be both .finite and .daemon")
	}
	n.Background, n.Finite, n.Daemon = seen[markerBackground], seen[markerFinite], seen[markerDaemon]
	return nil
}

// setOrder parses "NN_desc" or "desc".
func (n *Name) setOrder(head string) error {
	digits := 0
	for digits < len(head) && head[digits] >= '0' && head[digits] <= '9' {
		digits++
	}
	desc := head
	switch {
	case digits > 0 && digits == len(head):
		return fmt.Errorf("empty description after NN %q", head)
	case digits > 0 && head[digits] == '_':
		if digits != 2 {
			return fmt.Errorf("NN %q must be exactly two digits (00-99)", head[:digits])
		}
		n.NN = int(head[0]-'0')*10 + int(head[1]-'0')
		n.Step = int(head[0] - '0')
		n.Numbered = true
		desc = head[digits+1:]
	default:
		// No __NN_ prefix (a description may start with digits, e.g. 3d_render).
		n.NN, n.Step = UnnumberedNN, 9
	}
	if desc == "" {
		return errors.New("empty description")
	}
	if c, ok := firstOutside(desc, isDescChar); ok {
		return fmt.Errorf("description %q has character %q: only letters, digits, '_' and '-' are allowed", desc, c)
	}
	n.Desc = desc
	return nil
}

func isAlnum(r rune) bool {
	return r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9'
}

func isDescChar(r rune) bool { return isAlnum(r) || r == '_' || r == '-' }

// firstOutside returns the first rune of s for which ok is false.
func firstOutside(s string, ok func(rune) bool) (rune, bool) {
	for _, r := range s {
		if !ok(r) {
			return r, true
		}
	}
	return 0, false
}
