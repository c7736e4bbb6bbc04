package builtin

import (
	"bytes"
	"context"
	"fmt"
	"html/template"
	"path/filepath"
	"strings"
	"time"

	"github.com/archiveflow/archiveflow/internal/builtin/hookio"
	"github.com/archiveflow/archiveflow/internal/builtin/snapfiles"
	"github.com/archiveflow/archiveflow/internal/model"
)

// maxTitleBytes caps the title read back from title.txt.
const maxTitleBytes = 64 << 10

// Files of the index hook (in SNAP_DIR/index/).
const (
	indexJSONFile = "index.json"
	indexHTMLFile = "index.html"
)

// indexDoc is index.json.
type indexDoc struct {
	URL        string        `json:"url"`
	SnapshotID string        `json:"snapshot_id"`
	Title      string        `json:"title,omitempty"`
	IndexedAt  time.Time     `json:"indexed_at"`
	Plugins    []indexPlugin `json:"plugins"`
	Files      int           `json:"files"`
	Bytes      int64         `json:"bytes"`
}

type indexPlugin struct {
	Name    string                 `json:"name"`
	Results []snapfiles.HookResult `json:"results"`
	Files   []indexFile            `json:"files"`
	Bytes   int64                  `json:"bytes"`
	// Symlinks are links the plugin left (paths relative to SNAP_DIR):
	// listed, never followed, linked or counted.
	Symlinks []string `json:"symlinks_not_followed,omitempty"`
}

type indexFile struct {
	Path string `json:"path"` // relative to SNAP_DIR
	Size int64  `json:"size"`
}

// runIndex summarises the snapshot: every plugin directory's hook results
// (the last ArchiveResult in the runner's stdout logs; empty while a
// background hook is still running) and output files, as index.json and a
// small static index.html linking to the files and to the snapshot's final
// index (SNAP_DIR/index.json and index.jsonl, which the seal writes once
// every hook, background ones included, is final: internal/snapindex). It
// runs last (step 9, NN 95). Symbolic links are listed as such, never
// followed, linked or counted, so the index cannot serve a file from
// outside the snapshot.
func runIndex(ctx context.Context, h *Hook) (hookio.Result, error) {
	doc, err := buildIndex(h)
	if err != nil {
		return hookio.Result{}, fmt.Errorf("index: %w", err)
	}
	if err := writeJSON(filepath.Join(h.Dir, indexJSONFile), doc); err != nil {
		return hookio.Result{}, err
	}
	var page bytes.Buffer
	if err := indexTemplate.Execute(&page, doc); err != nil {
		return hookio.Result{}, fmt.Errorf("index: render html: %w", err)
	}
	if err := writeFileAtomic(filepath.Join(h.Dir, indexHTMLFile), page.Bytes()); err != nil {
		return hookio.Result{}, err
	}
	return hookio.Result{Status: model.StatusSucceeded,
		OutputStr: fmt.Sprintf("%d plugins, %d files", len(doc.Plugins), doc.Files),
		OutputJSON: map[string]any{"file": indexJSONFile, "html_file": indexHTMLFile,
			"plugins": len(doc.Plugins), "files": doc.Files, "bytes": doc.Bytes}}, nil
}

func buildIndex(h *Hook) (*indexDoc, error) {
	own := filepath.Base(h.Dir)
	names, err := snapfiles.Plugins(h.SnapDir)
	if err != nil {
		return nil, err
	}
	doc := &indexDoc{URL: h.Inv.URL, SnapshotID: h.Inv.SnapshotID, IndexedAt: time.Now().UTC(), Plugins: []indexPlugin{}}
	if b, err := snapfiles.ReadFile(h.SnapDir, "title/"+titleFile, maxTitleBytes); err == nil {
		doc.Title = strings.TrimSpace(string(b))
	}
	for _, name := range names {
		if name == own {
			continue
		}
		dir := filepath.Join(h.SnapDir, name)
		results, err := snapfiles.LastResults(dir)
		if err != nil {
			return nil, err
		}
		listing, err := snapfiles.Walk(dir, func(rel string, _ bool) bool { return isTempFile(rel) })
		if err != nil {
			return nil, err
		}
		p := indexPlugin{Name: name, Results: results, Files: make([]indexFile, 0, len(listing.Files))}
		for _, f := range listing.Files {
			p.Files = append(p.Files, indexFile{Path: name + "/" + f.Path, Size: f.Size})
			p.Bytes += f.Size
		}
		for _, l := range listing.Symlinks {
			p.Symlinks = append(p.Symlinks, name+"/"+l)
		}
		doc.Files += len(p.Files)
		doc.Bytes += p.Bytes
		doc.Plugins = append(doc.Plugins, p)
	}
	return doc, nil
}

// indexTemplate renders index.html; html/template escapes every value, and
// file links are relative to SNAP_DIR/index/.
var indexTemplate = template.Must(template.New("index").Funcs(template.FuncMap{
	"status": func(s model.Status) string {
		if s == "" {
			return "no result yet"
		}
		return string(s)
	},
}).Parse(`<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<title>{{if .Title}}{{.Title}}{{else}}{{.URL}}{{end}} — archiveflow snapshot</title>
<style>
body{font-family:sans-serif;margin:2em;max-width:70em}
table{border-collapse:collapse;width:100%}
td,th{border-bottom:1px solid #ddd;padding:.3em .6em;text-align:left;vertical-align:top}
.succeeded{color:#070}.failed{color:#b00}.skipped,.noresults{color:#777}
</style>
</head>
<body>
<h1>{{if .Title}}{{.Title}}{{else}}{{.URL}}{{end}}</h1>
<p><a href="{{.URL}}">{{.URL}}</a><br>snapshot {{.SnapshotID}} · indexed {{.IndexedAt.Format "2006-01-02 15:04:05 UTC"}} · {{.Files}} files, {{.Bytes}} bytes</p>
<p>Final results of every hook, background hooks included, written at the seal after this page: <a href="../index.jsonl">index.jsonl</a> · <a href="../index.json">index.json</a></p>
<table>
<tr><th>plugin</th><th>result</th><th>files</th></tr>
{{range .Plugins}}<tr>
<td>{{.Name}}</td>
<td>{{range .Results}}<div class="{{status .Status}}">{{status .Status}}{{if .OutputStr}}: {{.OutputStr}}{{end}}{{if .Error}} ({{.Error}}){{end}}</div>{{end}}</td>
<td>{{range .Files}}<div><a href="../{{.Path}}">{{.Path}}</a> ({{.Size}} bytes)</div>{{end}}{{range .Symlinks}}<div>{{.}} (symbolic link, not followed)</div>{{end}}</td>
</tr>
{{end}}</table>
</body>
</html>
`))
