package egress

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// notFetchers are the only non-test files that may make a connection
// without Transport/Dialer, each for a reason that is not a fetch.
var notFetchers = map[string]string{
	"internal/egress/egress.go":                   "the owner: Dialer, Transport and the proxy are defined here",
	"internal/egress/tunnel.go":                   "the owner: TunnelDialer, and Refusals asks the proxy itself on loopback",
	"internal/freeport/freeport.go":               "probes whether a loopback port is taken",
	"internal/webui/webui.go":                     "probes the Temporal Web UI this process started, on loopback",
	"internal/cdptest/cdptest.go":                 "a test helper (tests import it): asks the Chromium a test started for its DevTools targets, on loopback",
	"internal/metrics/metricstest/metricstest.go": "a test helper (tests import it): scrapes a worker's own /metrics endpoint, on loopback",
}

// TestNoFetcherDialsWithoutThePolicy: no Go file of the project (tests
// aside) builds an HTTP transport or dialer, uses net/http's default
// client or transport, or dials a socket itself, except through Transport
// and Dialer: a new fetcher cannot forget the fetch policy.
func TestNoFetcherDialsWithoutThePolicy(t *testing.T) {
	root := moduleRoot(t)
	var found []string
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if name := d.Name(); path != root && (strings.HasPrefix(name, ".") || name == "testdata" || name == "node_modules") {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		rel, _ := filepath.Rel(root, path)
		if _, ok := notFetchers[filepath.ToSlash(rel)]; ok {
			return nil
		}
		for _, f := range unpolicedDials(t, path) {
			found = append(found, rel+":"+f)
		}
		return nil
	})
	require.NoError(t, err)
	assert.Empty(t, found, "connect through egress.Transport or egress.Dialer (internal/egress), which hold the fetch policy")
	for rel := range notFetchers {
		_, err := os.Stat(filepath.Join(root, rel))
		assert.NoError(t, err, "an allowed file is gone: drop it from notFetchers")
	}
}

// TestTheScanFindsAnUnpolicedClient: the scan above can fail.
func TestTheScanFindsAnUnpolicedClient(t *testing.T) {
	path := filepath.Join(t.TempDir(), "bad.go")
	require.NoError(t, os.WriteFile(path, []byte(`package bad

import (
	web "net/http"
	"net"
)

func a() { _, _ = web.Get("http://x/") }
func b() *web.Client { return &web.Client{} }
func c() *web.Transport { return &web.Transport{} }
func d() { _, _ = net.Dial("tcp", "x:1") }
func e() web.RoundTripper { return web.DefaultTransport }
func f() *web.Client { return &web.Client{Transport: nil} }
func g() *net.Dialer { return new(net.Dialer) }
func ok(t *web.Transport) *web.Client { return &web.Client{Transport: t} }
`), 0o644))
	assert.Len(t, unpolicedDials(t, path), 7)
}

// unpolicedDials lists the places in one file that connect without the
// policy, as "LINE: what".
func unpolicedDials(t *testing.T, path string) []string {
	t.Helper()
	fset := token.NewFileSet()
	file, err := parser.ParseFile(fset, path, nil, parser.SkipObjectResolution)
	require.NoError(t, err, path)
	pkgs := map[string]string{} // local name → import path
	for _, imp := range file.Imports {
		p, _ := strconv.Unquote(imp.Path.Value)
		name := p[strings.LastIndex(p, "/")+1:]
		if imp.Name != nil {
			name = imp.Name.Name
		}
		pkgs[name] = p
	}
	qualified := func(e ast.Expr) string {
		sel, ok := e.(*ast.SelectorExpr)
		if !ok {
			return ""
		}
		id, ok := sel.X.(*ast.Ident)
		if !ok || pkgs[id.Name] == "" {
			return ""
		}
		return pkgs[id.Name] + "." + sel.Sel.Name
	}
	// Values that connect (or hold a transport that does).
	forbidden := map[string]bool{
		"net/http.DefaultTransport": true, "net/http.DefaultClient": true,
		"net/http.Get": true, "net/http.Head": true, "net/http.Post": true, "net/http.PostForm": true,
		"net.Dial": true, "net.DialTimeout": true, "net.DialTCP": true, "net.DialUDP": true, "net.DialIP": true,
		"crypto/tls.Dial": true, "crypto/tls.DialWithDialer": true,
	}
	// Types whose new values connect however they are built.
	built := map[string]bool{"net/http.Transport": true, "net.Dialer": true, "crypto/tls.Dialer": true}
	var out []string
	report := func(pos token.Pos, what string) {
		out = append(out, strconv.Itoa(fset.Position(pos).Line)+": "+what)
	}
	ast.Inspect(file, func(n ast.Node) bool {
		switch x := n.(type) {
		case *ast.CompositeLit:
			switch q := qualified(x.Type); {
			case built[q]:
				report(x.Pos(), "a new "+q)
			case q == "net/http.Client" && !setsTransport(x):
				report(x.Pos(), "http.Client without a Transport (net/http's default transport)")
			}
		case *ast.CallExpr:
			if id, ok := x.Fun.(*ast.Ident); ok && id.Name == "new" && len(x.Args) == 1 && built[qualified(x.Args[0])] {
				report(x.Pos(), "a new "+qualified(x.Args[0]))
			}
		case *ast.SelectorExpr:
			if q := qualified(x); forbidden[q] {
				report(x.Pos(), q)
			}
		}
		return true
	})
	return out
}

// setsTransport reports an http.Client literal with a non-nil Transport.
func setsTransport(lit *ast.CompositeLit) bool {
	for _, el := range lit.Elts {
		kv, ok := el.(*ast.KeyValueExpr)
		if !ok {
			continue
		}
		if k, ok := kv.Key.(*ast.Ident); ok && k.Name == "Transport" {
			v, isIdent := kv.Value.(*ast.Ident)
			return !isIdent || v.Name != "nil"
		}
	}
	return false
}

func moduleRoot(t *testing.T) string {
	t.Helper()
	dir, err := os.Getwd()
	require.NoError(t, err)
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir
		}
		parent := filepath.Dir(dir)
		require.NotEqual(t, parent, dir, "go.mod not found")
		dir = parent
	}
}
