package hooks

import (
	"encoding/json"
	"errors"
	"sort"
	"strings"
	"testing"
)

func FuzzParseName(f *testing.F) {
	for _, seed := range []string{
		"on_Snapshot__61_wget.bg.sh", "on_Snapshot__00_chrome_launch.daemon.bg.js",
		"on_Snapshot__06_wget.finite.bg.py", "on_Snapshot__title.py", "on_Snapshot__1_x.sh",
		"on_Crawl__10_install.py", "config.json", "on_Snapshot__10_.sh", "on_Snapshot__10_a..sh",
		"on_Snapshot__10_a.finite.daemon.sh", "on_Snapshot", "on_Snapshot__", "on_Snapshot__é.sh",
	} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, name string) {
		n, err := ParseName(name)
		if err != nil {
			if err.Error() == "" {
				t.Fatalf("ParseName(%q): empty error", name)
			}
			var ne *NameError
			if errors.As(err, &ne) == errors.Is(err, ErrNotAHook) {
				t.Fatalf("ParseName(%q): error %v must be exactly one of *NameError and ErrNotAHook", name, err)
			}
			return
		}
		switch {
		case n.File != name || n.Stem+"."+n.Ext != name:
			t.Fatalf("ParseName(%q): File %q, Stem %q, Ext %q do not rebuild the name", name, n.File, n.Stem, n.Ext)
		case n.Desc == "" || n.Ext == "":
			t.Fatalf("ParseName(%q): empty desc or ext in %+v", name, n)
		case n.Background != strings.Contains(name, ".bg."):
			t.Fatalf("ParseName(%q): Background %v disagrees with the .bg. rule", name, n.Background)
		case n.Numbered && (n.NN < 0 || n.NN > 99 || n.Step != n.NN/10):
			t.Fatalf("ParseName(%q): numbered NN %d step %d", name, n.NN, n.Step)
		case !n.Numbered && (n.NN != UnnumberedNN || n.Step != 9):
			t.Fatalf("ParseName(%q): unnumbered NN %d step %d", name, n.NN, n.Step)
		case n.Finite && n.Daemon:
			t.Fatalf("ParseName(%q): both finite and daemon", name)
		}
	})
}

func FuzzResolve(f *testing.F) {
	f.Add([]byte(wgetConfig), "TIMEOUT", "90", "wget_extra_args", "a,b")
	f.Add([]byte(`{"properties":{"A":{"default":"{B}"},"B":{"default":"{A}"}}}`), "A", "x", "b", "y")
	f.Add([]byte(`{"properties":{"A":{"x-fallback":"B"},"B":{"x-fallback":"A"}}}`), "B", "1", "a", "2")
	f.Add([]byte(`{"properties":{"K":{"type":"integer","minimum":5,"maximum":9,"enum":[5,7]}}}`), "K", "7", "k", "6")
	f.Add([]byte(`{"properties":{"K":{"type":"string","pattern":"^a+$","default":"{SNAP_DIR}"}}}`), "SNAP_DIR", "aaa", "k", "b")
	f.Add([]byte(`{"properties":{"K":{"type":"object"}},"x-runtimes":["abx-dl"]}`), "K", `{"a":[1]}`, "P_ENABLED", "off")
	f.Add([]byte(`{"properties":{"P_TIMEOUT":{"type":"number"}}}`), "P_TIMEOUT", "1e400", "timeout", "-1")
	f.Fuzz(func(t *testing.T, doc []byte, envKey, envVal, fileKey, fileVal string) {
		s, err := ParseSchema(doc, "fuzz/config.json", "p")
		if err != nil {
			if err.Error() == "" {
				t.Fatal("ParseSchema: empty error")
			}
			return
		}
		checkSchemaRoundTrip(t, s)
		res, err := s.Resolve(Sources{
			Job:  map[string]string{fileKey: envVal},
			Env:  map[string]string{envKey: envVal},
			File: map[string]any{fileKey: fileVal},
			Base: map[string]string{"SNAP_DIR": "/snap", envKey: fileVal},
		})
		if err != nil {
			var ce *ConfigError
			if !errors.As(err, &ce) || err.Error() == "" || ce.Key == "" || ce.Rule == "" {
				t.Fatalf("Resolve: want a complete *ConfigError, got %#v", err)
			}
			return
		}
		env := res.Env()
		if !sort.StringsAreSorted(env) {
			t.Fatalf("Env() not sorted: %q", env)
		}
		enabled := "P_ENABLED=False"
		if res.Enabled {
			enabled = "P_ENABLED=True"
		}
		found := false
		for _, kv := range env {
			found = found || kv == enabled
			if !strings.Contains(kv, "=") {
				t.Fatalf("Env() entry without '=': %q", kv)
			}
		}
		if !found {
			t.Fatalf("Env() %q lacks %s", env, enabled)
		}
		if res.Timeout(-1) < -1 {
			t.Fatalf("negative timeout %s", res.Timeout(-1))
		}
	})
}

// checkSchemaRoundTrip asserts a parsed schema survives JSON encoding.
func checkSchemaRoundTrip(t *testing.T, s *Schema) {
	t.Helper()
	data, err := json.Marshal(s)
	if err != nil {
		t.Fatalf("marshal schema: %v", err)
	}
	var back Schema
	if err := json.Unmarshal(data, &back); err != nil {
		t.Fatalf("unmarshal schema: %v", err)
	}
	if strings.Join(back.Keys(), ",") != strings.Join(s.Keys(), ",") {
		t.Fatalf("round trip keys %q != %q", back.Keys(), s.Keys())
	}
}
