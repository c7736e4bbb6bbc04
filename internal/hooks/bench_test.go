package hooks

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"
)

func BenchmarkParseName(b *testing.B) {
	for b.Loop() {
		if _, err := ParseName("on_Snapshot__10_chrome_tab.daemon.bg.js"); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkParseSchemaWget(b *testing.B) {
	doc := []byte(wgetConfig)
	for b.Loop() {
		if _, err := ParseSchema(doc, "wget/config.json", "wget"); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkResolveWget(b *testing.B) {
	s := mustSchema(b, "wget", wgetConfig)
	src := Sources{
		Env:  map[string]string{"TIMEOUT": "90", "USER_AGENT": "Bot/1", "PATH": "/usr/bin"},
		File: map[string]any{"wget_extra_args": []any{"--a"}},
		Base: map[string]string{"SNAP_DIR": "/snap"},
	}
	for b.Loop() {
		res, err := s.Resolve(src)
		if err != nil {
			b.Fatal(err)
		}
		_ = res.Env()
	}
}

// BenchmarkDiscover measures discovery of 60 plugins with 2 hooks and a
// config.json each (about the size of abx-plugins).
func BenchmarkDiscover(b *testing.B) {
	root := b.TempDir()
	for i := range 60 {
		dir := filepath.Join(root, fmt.Sprintf("plugin%02d", i))
		if err := os.MkdirAll(dir, 0o755); err != nil {
			b.Fatal(err)
		}
		for j, name := range []string{fmt.Sprintf("on_Snapshot__%02d_p%d.sh", i%100, i), fmt.Sprintf("on_Snapshot__%02d_p%d_bg.bg.sh", (i+50)%100, i)} {
			if err := os.WriteFile(filepath.Join(dir, name), []byte(hookScript), 0o755); err != nil {
				b.Fatal(err, j)
			}
		}
		if err := os.WriteFile(filepath.Join(dir, "config.json"), []byte(wgetConfig), 0o644); err != nil {
			b.Fatal(err)
		}
	}
	b.ResetTimer()
	for b.Loop() {
		plan, err := Discover([]string{root}, nil)
		if err != nil {
			b.Fatal(err)
		}
		if len(plan.Hooks) != 120 {
			b.Fatalf("discovered %d hooks, want 120", len(plan.Hooks))
		}
	}
}
