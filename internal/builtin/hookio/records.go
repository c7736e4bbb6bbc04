package hookio

import (
	"encoding/json"
	"fmt"
	"io"
	"sync"

	"github.com/archiveflow/archiveflow/internal/jsonl"
	"github.com/archiveflow/archiveflow/internal/model"
)

// Result is the ArchiveResult a hook reports about its own run.
type Result struct {
	Status     model.Status
	OutputStr  string
	OutputJSON any    // marshalled as output_json when non-nil
	Error      string // human-readable reason for failed/skipped
}

// Emitter writes JSONL records (internal/jsonl owns their format) to a
// hook's stdout. It is safe for concurrent use: each record is one Write of
// one complete line.
type Emitter struct {
	mu sync.Mutex
	w  io.Writer
}

// NewEmitter returns an Emitter writing to w.
func NewEmitter(w io.Writer) *Emitter { return &Emitter{w: w} }

// Result writes an ArchiveResult record.
func (e *Emitter) Result(r Result) error {
	if _, err := model.ParseStatus(string(r.Status)); err != nil {
		return fmt.Errorf("emit ArchiveResult: %w", err)
	}
	ar := &jsonl.ArchiveResult{Status: r.Status, OutputStr: r.OutputStr, Error: r.Error}
	if r.OutputJSON != nil {
		raw, err := json.Marshal(r.OutputJSON)
		if err != nil {
			return fmt.Errorf("emit ArchiveResult: encode output_json: %w", err)
		}
		ar.OutputJSON = raw
	}
	return e.write(jsonl.Record{Type: jsonl.TypeArchiveResult, ArchiveResult: ar})
}

// Snapshot writes a Snapshot record for a discovered URL.
func (e *Emitter) Snapshot(url string, depth int) error {
	return e.write(SnapshotRecord(url, depth))
}

// SnapshotRecord is the record Emitter.Snapshot writes; hooks that also keep
// the records in a file (outlinks' urls.jsonl) marshal the same value.
func SnapshotRecord(url string, depth int) jsonl.Record {
	return jsonl.Record{Type: jsonl.TypeSnapshot, Snapshot: &jsonl.Snapshot{URL: url, Depth: depth}}
}

// Title writes a Snapshot record without a url: the snapshot id's new
// title (ArchiveBox's {"type": "Snapshot", "id": ..., "title": ...}).
func (e *Emitter) Title(snapshotID, title string) error {
	return e.write(jsonl.Record{Type: jsonl.TypeSnapshot, Snapshot: &jsonl.Snapshot{ID: snapshotID, Title: title}})
}

// Tag writes a Tag record.
func (e *Emitter) Tag(name string) error {
	return e.write(jsonl.Record{Type: jsonl.TypeTag, Tag: &jsonl.Tag{Name: name}})
}

// Response writes a Response record for one HTTP fetch.
func (e *Emitter) Response(r model.Response) error {
	return e.write(jsonl.Record{Type: jsonl.TypeResponse, Response: &r})
}

func (e *Emitter) write(rec jsonl.Record) error {
	line, err := json.Marshal(rec)
	if err != nil {
		return fmt.Errorf("encode record: %w", err)
	}
	line = append(line, '\n')
	e.mu.Lock()
	defer e.mu.Unlock()
	if _, err := e.w.Write(line); err != nil {
		return fmt.Errorf("write record: %w", err)
	}
	return nil
}
