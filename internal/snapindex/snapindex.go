// Package snapindex owns a sealed snapshot's index: the files at the root
// of SNAP_DIR that say, once every hook of the snapshot is final, what each
// hook ended with. index.jsonl is ArchiveBox's per-snapshot index (one JSON
// record a line: the Snapshot first, then one ArchiveResult per hook, the
// fields ArchiveBox and abx-dl read, plus archiveflow's attempts and
// duration); index.json is the same as one document, in the shape of
// ArchiveBox's older per-snapshot index.json. Both are written at the seal
// (the SealSnapshot activity on the host that ran the hooks), replacing
// whatever an earlier claim or run left, through an os.Root of SNAP_DIR
// (internal/builtin/snapfiles OpenRoot): a hook that replaced SNAP_DIR or
// an index file with a symbolic link cannot make the seal write elsewhere.
//
// A crawl page attempt's index is index.json's document on one line
// (Line, ParseLine): internal/pageindex appends it to the crawl's page
// index on the host that ran the page.
package snapindex

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"github.com/archiveflow/archiveflow/internal/builtin/snapfiles"
	"github.com/archiveflow/archiveflow/internal/model"
)

// File names of the index in SNAP_DIR.
const (
	JSONFile  = "index.json"
	JSONLFile = "index.jsonl"
)

// Snapshot is what the index says about the snapshot itself.
type Snapshot struct {
	ID  string
	URL string
	// Page is a crawl page's id (0: not a crawl page); Line writes it.
	Page int64
	// Title is the title the index says (Read, ParseLine); Write and Line
	// take it from the results (model.TitleAndTags).
	Title string
	// Depth is the snapshot's crawl depth (0 for a single URL).
	Depth int
	// State is archiveflow's final job state and Error why it is not
	// finished, if it is not.
	State model.JobState
	Error string
	// SealedAt is when the seal wrote the index.
	SealedAt time.Time
	// WACZ is the job's WACZ the seal wrote (a file name in the snapshot
	// directory), or WACZError why it wrote none.
	WACZ, WACZError string
	// Captures is the WARC of the hooks' captures of the page (resource
	// records), a file name in the snapshot directory.
	Captures string
}

// snapshotRecord is the first line of index.jsonl.
type snapshotRecord struct {
	Type     string         `json:"type"` // "Snapshot"
	ID       string         `json:"id"`
	URL      string         `json:"url"`
	Title    string         `json:"title,omitempty"`
	Tags     []string       `json:"tags,omitempty"`
	Depth    int            `json:"depth"`
	Status   string         `json:"status"` // "sealed"
	State    model.JobState `json:"archiveflow_state"`
	Error    string         `json:"error,omitempty"`
	SealedAt time.Time      `json:"sealed_at"`
	WACZ     string         `json:"wacz,omitempty"`
	WACZErr  string         `json:"wacz_error,omitempty"`
	Captures string         `json:"captures_warc,omitempty"`
}

// resultRecord is one ArchiveResult line of index.jsonl (and one entry of
// index.json's archive_results).
type resultRecord struct {
	Type        string             `json:"type"` // "ArchiveResult"
	SnapshotID  string             `json:"snapshot_id"`
	Plugin      string             `json:"plugin"`
	HookName    string             `json:"hook_name"`
	Status      model.Status       `json:"status"`
	OutputStr   string             `json:"output_str"`
	OutputJSON  json.RawMessage    `json:"output_json,omitempty"`
	OutputFiles []model.OutputFile `json:"output_files,omitempty"`
	OutputSize  int64              `json:"output_size,omitempty"`
	Error       string             `json:"error,omitempty"`
	StartTS     *time.Time         `json:"start_ts"`
	EndTS       *time.Time         `json:"end_ts"`
	// archiveflow's own fields; ArchiveBox's readers ignore them.
	Step       int   `json:"step"`
	Background bool  `json:"background,omitempty"`
	Attempts   int   `json:"attempts"`
	ExitCode   int   `json:"exit_code"`
	DurationMS int64 `json:"duration_ms"`
	// Unknown counts the records of an unknown type the hook printed
	// (kept in its stdout log).
	Unknown int64 `json:"unknown_records,omitempty"`
}

// document is index.json (and, with Page, a Line).
type document struct {
	Page           int64          `json:"page,omitempty"` // first: pageindex finds a page's lines by their prefix
	ID             string         `json:"snapshot_id"`
	URL            string         `json:"url"`
	Title          string         `json:"title,omitempty"`
	Tags           []string       `json:"tags,omitempty"`
	Depth          int            `json:"depth"`
	State          model.JobState `json:"archiveflow_state"`
	Error          string         `json:"error,omitempty"`
	SealedAt       time.Time      `json:"sealed_at"`
	WACZ           string         `json:"wacz,omitempty"`
	WACZErr        string         `json:"wacz_error,omitempty"`
	Captures       string         `json:"captures_warc,omitempty"`
	ArchiveResults []resultRecord `json:"archive_results"`
}

// Write writes SNAP_DIR/index.json and SNAP_DIR/index.jsonl for snap and
// the final results of its hooks (in plan order), each atomically, and
// returns their paths. dir is created when missing (a snapshot whose hooks
// all were skipped has no directory yet); a dir that is a symbolic link is
// refused, and an index file a hook replaced with a link is replaced, never
// written through.
func Write(dir string, snap Snapshot, results []model.ArchiveResult) ([]string, error) {
	if snap.ID == "" || snap.URL == "" {
		return nil, errors.New("snapshot index: snapshot id and url must not be empty")
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("snapshot index: %w", err)
	}
	root, err := snapfiles.OpenRoot(dir)
	if err != nil {
		return nil, fmt.Errorf("snapshot index: %w", err)
	}
	defer root.Close()
	doc := newDocument(snap, results)
	var lines bytes.Buffer
	enc := json.NewEncoder(&lines) // one record a line, with its newline
	enc.SetEscapeHTML(false)
	if err := enc.Encode(snapshotRecord{Type: "Snapshot", ID: snap.ID, URL: snap.URL, Title: doc.Title, Tags: doc.Tags, Depth: snap.Depth,
		Status: "sealed", State: snap.State, Error: snap.Error, SealedAt: doc.SealedAt,
		WACZ: snap.WACZ, WACZErr: snap.WACZError, Captures: snap.Captures}); err != nil {
		return nil, fmt.Errorf("snapshot index %s: %w", JSONLFile, err)
	}
	for _, r := range doc.ArchiveResults {
		if err := enc.Encode(r); err != nil {
			return nil, fmt.Errorf("snapshot index %s: hook %s/%s: %w", JSONLFile, r.Plugin, r.HookName, err)
		}
	}
	doc.Page = 0 // index.json is ArchiveBox's shape
	data, err := json.MarshalIndent(doc, "", "  ")
	if err != nil {
		return nil, fmt.Errorf("snapshot index %s: %w", JSONFile, err)
	}
	names := []string{JSONFile, JSONLFile}
	paths := make([]string, len(names))
	for i, data := range [][]byte{append(data, '\n'), lines.Bytes()} {
		if err := writeAtomic(root, names[i], data); err != nil {
			return nil, fmt.Errorf("snapshot index: write %s: %w", filepath.Join(dir, names[i]), err)
		}
		paths[i] = filepath.Join(dir, names[i])
	}
	return paths, nil
}

// newDocument is snap and the final results of its hooks as index.json's
// document.
func newDocument(snap Snapshot, results []model.ArchiveResult) document {
	title, tags := model.TitleAndTags(results)
	records := make([]resultRecord, len(results))
	for i, r := range results {
		records[i] = record(snap.ID, r)
	}
	return document{Page: snap.Page, ID: snap.ID, URL: snap.URL, Title: title, Tags: tags, Depth: snap.Depth, State: snap.State,
		Error: snap.Error, SealedAt: snap.SealedAt.UTC(), WACZ: snap.WACZ, WACZErr: snap.WACZError, Captures: snap.Captures,
		ArchiveResults: records}
}

// Line is snap and the final results of its hooks (in plan order) as
// index.json's document on one line, ending in a newline, with snap.Page
// first: a crawl page attempt's line of the crawl's page index.
func Line(snap Snapshot, results []model.ArchiveResult) ([]byte, error) {
	if snap.ID == "" || snap.URL == "" {
		return nil, errors.New("snapshot index line: snapshot id and url must not be empty")
	}
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(newDocument(snap, results)); err != nil {
		return nil, fmt.Errorf("snapshot index line of %s: %w", snap.ID, err)
	}
	return b.Bytes(), nil
}

// ParseLine reads a Line back: the snapshot (its Page and Title) and its
// hooks' results in the order written.
func ParseLine(line []byte) (Snapshot, []model.ArchiveResult, error) {
	var d document
	if err := json.Unmarshal(line, &d); err != nil {
		return Snapshot{}, nil, fmt.Errorf("snapshot index line: %w", err)
	}
	if d.ID == "" {
		return Snapshot{}, nil, errors.New("snapshot index line: no snapshot_id")
	}
	snap := Snapshot{ID: d.ID, URL: d.URL, Page: d.Page, Title: d.Title, Depth: d.Depth, State: d.State, Error: d.Error,
		SealedAt: d.SealedAt, WACZ: d.WACZ, WACZError: d.WACZErr, Captures: d.Captures}
	results := make([]model.ArchiveResult, len(d.ArchiveResults))
	for i, r := range d.ArchiveResults {
		results[i] = r.result()
	}
	return snap, results, nil
}

// record is r as an ArchiveResult line of snapshot id.
func record(id string, r model.ArchiveResult) resultRecord {
	rec := resultRecord{
		Type: "ArchiveResult", SnapshotID: id, Plugin: r.Plugin, HookName: r.Hook, Status: r.Status,
		OutputStr: r.OutputStr, OutputJSON: r.OutputJSON, OutputFiles: r.Outputs, OutputSize: r.OutputBytes,
		Error: r.Error, Step: r.Step, Background: r.Background, Attempts: r.Attempts, ExitCode: r.ExitCode,
		Unknown: r.Unknown,
	}
	if !r.StartedAt.IsZero() {
		t := r.StartedAt.UTC()
		rec.StartTS = &t
	}
	if !r.EndedAt.IsZero() {
		t := r.EndedAt.UTC()
		rec.EndTS = &t
	}
	if rec.StartTS != nil && rec.EndTS != nil {
		rec.DurationMS = rec.EndTS.Sub(*rec.StartTS).Milliseconds()
	}
	return rec
}

// writeAtomic writes data to a new temporary file beside name in root and
// renames it over name: a reader sees the old index or the new one, never
// a part. The rename replaces a symbolic link at name rather than
// following it.
func writeAtomic(root *os.Root, name string, data []byte) error {
	tmp := "." + name + ".tmp" + strconv.FormatUint(rand.Uint64(), 36)
	f, err := root.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		return err
	}
	_, err = f.Write(data)
	if err == nil {
		err = f.Chmod(0o644) // whatever the umask
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = root.Rename(tmp, name)
	}
	if err != nil {
		_ = root.Remove(tmp) // only then: a page's index is written on every page
	}
	return err
}

// Read reads the index.jsonl in dir back: the snapshot and its hooks'
// results in the order written. A missing index is an error wrapping
// fs.ErrNotExist.
func Read(dir string) (Snapshot, []model.ArchiveResult, error) {
	data, err := snapfiles.ReadFile(dir, JSONLFile, maxIndexBytes)
	if err != nil {
		return Snapshot{}, nil, fmt.Errorf("read snapshot index: %w", err)
	}
	var snap Snapshot
	var results []model.ArchiveResult
	for i, line := range bytes.Split(bytes.TrimSpace(data), []byte("\n")) {
		if i == 0 {
			var s snapshotRecord
			if err := json.Unmarshal(line, &s); err != nil || s.Type != "Snapshot" {
				return Snapshot{}, nil, fmt.Errorf("read snapshot index %s: line 1 is not its Snapshot record", filepath.Join(dir, JSONLFile))
			}
			snap = Snapshot{ID: s.ID, URL: s.URL, Title: s.Title, Depth: s.Depth, State: s.State, Error: s.Error, SealedAt: s.SealedAt,
				WACZ: s.WACZ, WACZError: s.WACZErr, Captures: s.Captures}
			continue
		}
		var r resultRecord
		if err := json.Unmarshal(line, &r); err != nil || r.Type != "ArchiveResult" {
			return Snapshot{}, nil, fmt.Errorf("read snapshot index %s: line %d is not an ArchiveResult record", filepath.Join(dir, JSONLFile), i+1)
		}
		res := r.result()
		results = append(results, res)
	}
	return snap, results, nil
}

// result is the ArchiveResult r records.
func (r resultRecord) result() model.ArchiveResult {
	res := model.ArchiveResult{Plugin: r.Plugin, Hook: r.HookName, Step: r.Step, Background: r.Background, Status: r.Status,
		OutputStr: r.OutputStr, OutputJSON: r.OutputJSON, Error: r.Error, Attempts: r.Attempts, ExitCode: r.ExitCode,
		Outputs: r.OutputFiles, OutputBytes: r.OutputSize, Unknown: r.Unknown}
	if r.StartTS != nil {
		res.StartedAt = *r.StartTS
	}
	if r.EndTS != nil {
		res.EndedAt = *r.EndTS
	}
	return res
}

// maxIndexBytes bounds an index Read reads.
const maxIndexBytes = 64 << 20
