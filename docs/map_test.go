// Package docs holds the checks that keep the documentation true to the
// code; the documents themselves are the Markdown files beside it.
package docs

import (
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestEveryPackageIsOnTheMap fails when a package of the module is named
// nowhere in docs/architecture.md (a benchmark package: nowhere in
// docs/benchmarks.md), so the map stays the map: a newcomer finds every
// package, and so every rule's owner, from that page.
func TestEveryPackageIsOnTheMap(t *testing.T) {
	arch := readDoc(t, "architecture.md")
	bench := readDoc(t, "benchmarks.md")
	pkgs := modulePackages(t, "..")
	require.Contains(t, pkgs, "internal/engine", "the walk finds the module's packages")
	for _, p := range pkgs {
		doc, name := arch, "docs/architecture.md"
		if strings.HasPrefix(p, "bench/") {
			doc, name = bench, "docs/benchmarks.md"
		}
		assert.True(t, namesPath(doc, p), "%s names package %s", name, p)
	}
}

func TestNamesPathMatchesWholePathsOnly(t *testing.T) {
	assert.True(t, namesPath("see internal/metrics (the metrics)", "internal/metrics"))
	assert.True(t, namesPath("`internal/metrics`", "internal/metrics"))
	assert.True(t, namesPath("(internal/metrics/serve.go)", "internal/metrics"))
	assert.True(t, namesPath("go test ./bench/purge/", "bench/purge"))
	assert.False(t, namesPath("internal/metrics/metricstest only", "internal/metrics"))
	assert.False(t, namesPath("xinternal/metrics", "internal/metrics"))
	assert.False(t, namesPath("internal/metricsx", "internal/metrics"))
}

func readDoc(t *testing.T, name string) string {
	t.Helper()
	b, err := os.ReadFile(name)
	require.NoError(t, err, "read docs/%s", name)
	return string(b)
}

// namesPath reports whether doc names the package path p as a whole path,
// or a Go file in it: not as a part of a longer path or word.
func namesPath(doc, p string) bool {
	re := regexp.MustCompile(`(^|[^\w/.-]|\./)` + regexp.QuoteMeta(p) + `(/[\w.-]+\.go|/?)($|[^\w/-])`)
	return re.MatchString(doc)
}

// modulePackages lists the directories under root holding Go files,
// relative to root, as the go command sees packages: testdata, vendor and
// directories starting with "." or "_" are skipped. This package (docs)
// is not listed.
func modulePackages(t *testing.T, root string) []string {
	t.Helper()
	seen := map[string]bool{}
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		name := d.Name()
		if d.IsDir() {
			if path != root && (name == "testdata" || name == "vendor" || name == "node_modules" ||
				strings.HasPrefix(name, ".") || strings.HasPrefix(name, "_")) {
				return filepath.SkipDir
			}
			return nil
		}
		if strings.HasSuffix(name, ".go") {
			rel, err := filepath.Rel(root, filepath.Dir(path))
			if err != nil {
				return err
			}
			if rel != "." && rel != "docs" {
				seen[filepath.ToSlash(rel)] = true
			}
		}
		return nil
	})
	require.NoError(t, err, "walk the module from %s", root)
	out := make([]string, 0, len(seen))
	for p := range seen {
		out = append(out, p)
	}
	sort.Strings(out)
	return out
}
