package hooks

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestParseNameValid(t *testing.T) {
	tests := []struct {
		name string
		want Name
	}{
		{"on_Snapshot__61_wget.bg.sh", Name{Stem: "on_Snapshot__61_wget.bg", Desc: "wget", Ext: "sh", NN: 61, Step: 6, Numbered: true, Background: true}},
		{"on_Snapshot__00_chrome_launch.daemon.bg.js", Name{Stem: "on_Snapshot__00_chrome_launch.daemon.bg", Desc: "chrome_launch", Ext: "js", NN: 0, Step: 0, Numbered: true, Background: true, Daemon: true}},
		{"on_Snapshot__06_wget.finite.bg.py", Name{Stem: "on_Snapshot__06_wget.finite.bg", Desc: "wget", Ext: "py", NN: 6, Step: 0, Numbered: true, Background: true, Finite: true}},
		{"on_Snapshot__54_title.js", Name{Stem: "on_Snapshot__54_title", Desc: "title", Ext: "js", NN: 54, Step: 5, Numbered: true}},
		{"on_Snapshot__99_seal-check.sh", Name{Stem: "on_Snapshot__99_seal-check", Desc: "seal-check", Ext: "sh", NN: 99, Step: 9, Numbered: true}},
		{"on_Snapshot__30_x.finite.py", Name{Stem: "on_Snapshot__30_x.finite", Desc: "x", Ext: "py", NN: 30, Step: 3, Numbered: true, Finite: true}},
		// .bg. anywhere in the name: marker order is free.
		{"on_Snapshot__12_rec.bg.daemon.js", Name{Stem: "on_Snapshot__12_rec.bg.daemon", Desc: "rec", Ext: "js", NN: 12, Step: 1, Numbered: true, Background: true, Daemon: true}},
		// Unnumbered: step 9, NN after every numbered hook.
		{"on_Snapshot__title.py", Name{Stem: "on_Snapshot__title", Desc: "title", Ext: "py", NN: UnnumberedNN, Step: 9}},
		{"on_Snapshot__3d_render.bg.sh", Name{Stem: "on_Snapshot__3d_render.bg", Desc: "3d_render", Ext: "sh", NN: UnnumberedNN, Step: 9, Background: true}},
		// The description may itself contain digit groups and underscores.
		{"on_Snapshot__45_2fa_login_v2.sh", Name{Stem: "on_Snapshot__45_2fa_login_v2", Desc: "2fa_login_v2", Ext: "sh", NN: 45, Step: 4, Numbered: true}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ParseName(tt.name)
			require.NoError(t, err)
			tt.want.File = tt.name
			assert.Equal(t, tt.want, got)
		})
	}
}

func TestParseNameNotAHook(t *testing.T) {
	for _, name := range []string{
		"config.json", "README.md", "chrome_utils.js", "templates", "",
		"on_Crawl__10_wget_install.finite.bg.py", "on_Install__70_chrome.finite.bg.py",
		"on_CrawlSetup__90_chrome_launch.daemon.bg.js", "on_SnapshotSetup__10_x.sh",
		"on_snapshot__10_lowercase.sh", "xon_Snapshot__10_x.sh",
	} {
		t.Run(name, func(t *testing.T) {
			_, err := ParseName(name)
			require.ErrorIs(t, err, ErrNotAHook)
			var ne *NameError
			assert.False(t, errors.As(err, &ne), "not-a-hook must not be a grammar error")
		})
	}
}

func TestParseNameGrammarErrors(t *testing.T) {
	tests := []struct {
		name string
		rule string // substring of the error
	}{
		{"on_Snapshot__10_wget", "no extension"},
		{"on_Snapshot__10_wget.", "empty extension"},
		{"on_Snapshot__10_.sh", "empty description"},
		{"on_Snapshot__10.sh", "empty description"},
		{"on_Snapshot__.sh", "empty description"},
		{"on_Snapshot__1_x.sh", "exactly two digits"},
		{"on_Snapshot__100_x.sh", "exactly two digits"},
		{"on_Snapshot__10_we get.sh", "only letters, digits, '_' and '-'"},
		{"on_Snapshot__10_wget$.sh", "only letters, digits, '_' and '-'"},
		{"on_Snapshot__10_wget.s-h", "only letters and digits"},
		{"on_Snapshot__10_wget.v2.sh", "unknown marker \"v2\""},
		{"on_Snapshot__10_wget..sh", "empty marker"},
		{"on_Snapshot__10_wget.bg.bg.sh", "appears twice"},
		{"on_Snapshot__10_wget.finite.daemon.sh", "both .finite and .daemon"},
		{"on_Snapshot_10_wget.sh", "double underscore"},
		{"on_Snapshot.sh", "double underscore"},
		{"on_Snapshot", "double underscore"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := ParseName(tt.name)
			require.Error(t, err)
			var ne *NameError
			require.ErrorAs(t, err, &ne)
			assert.NotErrorIs(t, err, ErrNotAHook)
			assert.Equal(t, tt.name, ne.Name)
			assert.Contains(t, err.Error(), tt.rule)
			assert.Contains(t, err.Error(), tt.name, "the error names the file")
		})
	}
}
