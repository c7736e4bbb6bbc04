package main

import (
	"context"
	"errors"
	"fmt"
	"html/template"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/spf13/pflag"
)

func replayCommand() *command {
	return &command{
		name:    "replay",
		args:    "IDENT|FILE.wacz",
		summary: "serve a job's WACZ on loopback (HTTP Range, CORS) for ReplayWeb.page, offline",
		details: `
Serves a WACZ on a loopback address until interrupted: the WACZ the job's
seal wrote when this host has it (status names it), else ./IDENT.wacz
(written first by export when it is not there; export again to refresh
it), or the .wacz file named. The WACZ is served at
/wacz/NAME.wacz with HTTP Range requests and CORS, as ReplayWeb.page reads
it. Nothing needs the internet:

  --viewer DIR serves a copy of ReplayWeb.page (the npm package
  replaywebpage unpacked: index.html, ui.js, sw.js) beside the WACZ and
  prints the URL that opens the job in it. Get the copy once, anywhere
  with the npm registry: npm pack replaywebpage, tar xzf the .tgz, and
  pass its package/ directory.

  Without --viewer, / is a page naming the WACZ's URL and the offline
  ways to open it (the ReplayWeb.page desktop app opens the file itself).

The address must be a loopback one (127.0.0.1, ::1, localhost): the WACZ
is the whole job, not for the network.`,
		examples: []string{
			"starter replay 3mlbkdu1fpo7wt4lr2qf1mpsw --viewer ~/replaywebpage/package",
			"starter replay ./example.wacz --listen 127.0.0.1:9990",
		},
		flags: func(fs *pflag.FlagSet) {
			fs.String("listen", "127.0.0.1:0", "loopback address to serve on (port 0: any free port)")
			fs.String("viewer", "", "a directory holding ReplayWeb.page (index.html, ui.js, sw.js) to serve beside the WACZ")
		},
		run: runReplay,
	}
}

func runReplay(ctx context.Context, a *app, inv *invocation) error {
	if len(inv.args) != 1 {
		return usageErr("want exactly one IDENT or FILE.wacz, got %d argument(s) (see: starter help replay)", len(inv.args))
	}
	listen, _ := inv.fs.GetString("listen")
	if err := checkLoopback(listen); err != nil {
		return usageErr("--listen %s: %v", listen, err)
	}
	viewer, _ := inv.fs.GetString("viewer")
	if viewer != "" {
		for _, f := range []string{"index.html", "ui.js", "sw.js"} {
			if fi, err := os.Stat(filepath.Join(viewer, f)); err != nil || !fi.Mode().IsRegular() {
				return usageErr("--viewer %s: no %s: want ReplayWeb.page's files (the npm package replaywebpage, unpacked)", viewer, f)
			}
		}
	}
	file := inv.args[0]
	if !strings.HasSuffix(file, ".wacz") {
		id, err := parseIdent(file)
		if err != nil {
			return err
		}
		file = id + ".wacz"
		if sealed := a.sealedWACZ(ctx, inv, id); sealed != "" {
			file = sealed
		} else if _, err := os.Stat(file); errors.Is(err, os.ErrNotExist) {
			o, err := a.export(ctx, inv, id, file)
			if err != nil {
				return err
			}
			fmt.Fprintf(a.stdout, "wrote %s: %d WARC(s) from %s, %d page(s)\n", file, len(o.WARCs), o.From, o.Pages)
		}
	}
	f, err := os.Open(file)
	if err != nil {
		return withCode(exitNotFound, err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil || !fi.Mode().IsRegular() {
		return withCode(exitNotFound, fmt.Errorf("%s: not a regular file", file))
	}

	l, err := net.Listen("tcp", listen)
	if err != nil {
		return withCode(exitUnavailable, err)
	}
	base := "http://" + l.Addr().String()
	waczURL := base + "/wacz/" + url.PathEscape(fi.Name())
	srv := &http.Server{Handler: replayHandler(f, fi, waczURL, viewer), ReadHeaderTimeout: 10 * time.Second}
	fmt.Fprintf(a.stdout, "serving %s (%d bytes, written %s) at %s (Range requests, CORS)\n",
		file, fi.Size(), fi.ModTime().UTC().Format(time.RFC3339), waczURL)
	if viewer != "" {
		fmt.Fprintf(a.stdout, "open %s/?source=%s in a browser on this host\n", base, url.QueryEscape(waczURL))
	} else {
		fmt.Fprintf(a.stdout, "open %s/ for the offline ways to view it (or pass --viewer DIR with ReplayWeb.page's files)\n", base)
	}
	fmt.Fprintln(a.stdout, "interrupt (Ctrl-C) to stop")
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(l) }()
	select {
	case err := <-errc:
		return withCode(exitUnavailable, err)
	case <-ctx.Done():
	}
	sctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	_ = srv.Shutdown(sctx)
	return nil
}

// checkLoopback refuses an address that is not on loopback.
func checkLoopback(addr string) error {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return err
	}
	if host == "localhost" {
		return nil
	}
	if ip := net.ParseIP(host); ip == nil || !ip.IsLoopback() {
		return errors.New("not a loopback address (127.0.0.1, ::1, localhost): the WACZ is served to this host only")
	}
	return nil
}

// replayHandler serves the WACZ at /wacz/NAME (Range, CORS), and at /
// the viewer's files, or a page saying how to open the WACZ offline.
func replayHandler(f *os.File, fi os.FileInfo, waczURL, viewer string) http.Handler {
	name := fi.Name()
	mux := http.NewServeMux()
	mux.HandleFunc("/wacz/", func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/wacz/"+name {
			http.NotFound(w, r)
			return
		}
		h := w.Header()
		h.Set("Access-Control-Allow-Origin", "*")
		h.Set("Access-Control-Allow-Headers", "Range")
		h.Set("Access-Control-Expose-Headers", "Content-Length, Content-Range, Accept-Ranges")
		switch r.Method {
		case http.MethodOptions:
			h.Set("Access-Control-Allow-Methods", "GET, HEAD")
			w.WriteHeader(http.StatusNoContent)
		case http.MethodGet, http.MethodHead:
			h.Set("Content-Type", "application/wacz")
			// Range, If-Range, HEAD; a section reader per request, as
			// requests run at once.
			http.ServeContent(w, r, name, fi.ModTime(), io.NewSectionReader(f, 0, fi.Size()))
		default:
			w.Header().Set("Allow", "GET, HEAD, OPTIONS")
			http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
		}
	})
	if viewer != "" {
		mux.Handle("/", http.FileServerFS(os.DirFS(viewer)))
		return mux
	}
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/" {
			http.NotFound(w, r)
			return
		}
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		_ = offlinePage.Execute(w, struct{ Name, URL string }{name, waczURL})
	})
	return mux
}

var offlinePage = template.Must(template.New("replay").Parse(`<!doctype html>
<meta charset="utf-8">
<title>{{.Name}}</title>
<h1>{{.Name}}</h1>
<p>The WACZ is served at <a href="{{.URL}}">{{.URL}}</a> (HTTP Range requests, CORS).</p>
<p>To view it without the internet:</p>
<ul>
<li>with a local copy of ReplayWeb.page: <code>npm pack replaywebpage</code> once (where the npm registry is reachable),
<code>tar xzf replaywebpage-*.tgz</code>, then <code>starter replay {{.Name}} --viewer package</code>
and open the URL it prints;</li>
<li>or open the file in the ReplayWeb.page desktop app;</li>
<li>or, from a ReplayWeb.page you host yourself, load <code>?source={{.URL}}</code>.</li>
</ul>
`))

// sealedWACZ is the WACZ job id's seal wrote, when this host has it ("":
// none, or Redis cannot tell).
func (a *app) sealedWACZ(ctx context.Context, inv *invocation, id string) string {
	b, err := a.connectRedis(ctx, inv)
	if err != nil {
		return ""
	}
	defer b.Close()
	v, err := b.Store.GetJob(ctx, id)
	if err != nil || v.Archive.WACZ == "" {
		return ""
	}
	if fi, err := os.Stat(v.Archive.WACZ); err != nil || !fi.Mode().IsRegular() {
		return ""
	}
	return v.Archive.WACZ
}
