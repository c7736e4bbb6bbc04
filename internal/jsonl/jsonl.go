// Package jsonl owns the hook output record format: the JSON lines a hook
// prints on stdout (ArchiveResult, Snapshot, Tag, Response) and their
// validation, and the one stderr convention the runner reads, notices for
// the job's log (NoticePrefix). It parses one line at a time and never
// panics on arbitrary bytes; splitting a stream into bounded lines is done
// by Splitter.
package jsonl

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"unicode/utf8"

	"github.com/archiveflow/archiveflow/internal/model"
)

// Type is the value of a record's "type" field.
type Type string

// Record types understood by archiveflow (DESIGN.md §3 "Output").
const (
	TypeArchiveResult Type = "ArchiveResult"
	TypeSnapshot      Type = "Snapshot"
	TypeTag           Type = "Tag"
	TypeResponse      Type = "Response"
)

// Sentinel errors returned by ParseLine. Lines failing with ErrNotJSON,
// ErrNoType or ErrUnknownType are "ignored" lines; ErrInvalid marks a record
// of a known type whose fields break a rule.
var (
	ErrNotJSON     = errors.New("not a JSON object")
	ErrNoType      = errors.New("JSON object without a string \"type\" field")
	ErrUnknownType = errors.New("unknown record type")
	ErrInvalid     = errors.New("invalid record")
)

// ArchiveResult is a hook's own statement of its result. The last one a hook
// prints decides its status.
type ArchiveResult struct {
	Status     model.Status    `json:"status"`
	OutputStr  string          `json:"output_str,omitempty"`
	OutputJSON json.RawMessage `json:"output_json,omitempty"`
	Error      string          `json:"error,omitempty"`
}

// Snapshot is, with a URL, a URL discovered by a hook (an outlink), in
// ArchiveBox's shape: the URL, optionally the depth the hook thinks it has
// and the URL of the page it was found on. A crawl records where it found
// a URL and computes depths itself (internal/frontier); Depth and Parent
// are kept for the record.
//
// Without a URL it updates the current snapshot, as ArchiveBox's
// {"type": "Snapshot", "id": ..., "title": ...} does (IsUpdate): ID, when
// given, names the snapshot (the hook's --snapshot-id) and Title is its
// new title. An outlink's own title, if it has one, is not kept.
type Snapshot struct {
	URL    string `json:"url,omitempty"`
	Depth  int    `json:"depth,omitempty"`
	Parent string `json:"parent,omitempty"`
	ID     string `json:"id,omitempty"`
	Title  string `json:"title,omitempty"`
}

// IsUpdate reports whether s updates the current snapshot (no URL) rather
// than naming a discovered one.
func (s Snapshot) IsUpdate() bool { return s.URL == "" }

// MaxTagRunes caps a Tag name's length, as ArchiveBox's Tag.name does.
const MaxTagRunes = 100

// Tag is a label a hook attaches to the snapshot.
type Tag struct {
	Name string `json:"name"`
}

// Record is one typed, validated JSONL record. Exactly one of the pointer
// fields is set, the one matching Type.
type Record struct {
	Type          Type
	ArchiveResult *ArchiveResult
	Snapshot      *Snapshot
	Tag           *Tag
	Response      *model.Response
}

// ParseLine parses one stdout line (without its newline). Blank lines and
// lines that do not start with '{' fail fast with ErrNotJSON without being
// decoded. The returned error wraps one of the sentinel errors above.
func ParseLine(line []byte) (Record, error) {
	line = bytes.TrimSpace(line)
	if len(line) == 0 || line[0] != '{' {
		return Record{}, ErrNotJSON
	}
	// One decoding pass into raw fields; each type then checks its own.
	w, err := decodeWire(line)
	if err != nil {
		return Record{}, ErrNotJSON
	}
	var typ string
	if len(w.Type) == 0 || json.Unmarshal(w.Type, &typ) != nil || typ == "" {
		return Record{}, ErrNoType
	}
	switch Type(typ) {
	case TypeArchiveResult:
		return w.archiveResult()
	case TypeSnapshot:
		return w.snapshot()
	case TypeTag:
		return w.tag()
	case TypeResponse:
		return w.response()
	default:
		return Record{}, fmt.Errorf("%w %q", ErrUnknownType, truncate(typ, 64))
	}
}

// wire holds every field any record type uses, undecoded.
type wire struct {
	Type       json.RawMessage
	Status     json.RawMessage
	OutputStr  json.RawMessage
	OutputJSON json.RawMessage
	Error      json.RawMessage
	URL        json.RawMessage
	Depth      json.RawMessage
	Name       json.RawMessage
	Parent     json.RawMessage
	ID         json.RawMessage
	Title      json.RawMessage
	Bytes      json.RawMessage
	WgetCode   json.RawMessage
	Requisite  json.RawMessage
	Reused     json.RawMessage
}

// decodeWire picks the fields by their exact names. encoding/json would
// also take "Type" or "STATUS"; ArchiveBox's Python reader does not, and a
// record must mean the same to both.
func decodeWire(line []byte) (wire, error) {
	var m map[string]json.RawMessage
	if err := json.Unmarshal(line, &m); err != nil {
		return wire{}, err
	}
	return wire{
		Type:       m["type"],
		Status:     m["status"],
		OutputStr:  m["output_str"],
		OutputJSON: m["output_json"],
		Error:      m["error"],
		URL:        m["url"],
		Depth:      m["depth"],
		Name:       m["name"],
		Parent:     m["parent"],
		ID:         m["id"],
		Title:      m["title"],
		Bytes:      m["bytes"],
		WgetCode:   m["wget_code"],
		Requisite:  m["requisite"],
		Reused:     m["reused"],
	}, nil
}

func (w *wire) archiveResult() (Record, error) {
	var raw string
	if err := json.Unmarshal(w.Status, &raw); err != nil {
		return Record{}, fmt.Errorf("%w: ArchiveResult status %s: must be a string", ErrInvalid, truncate(string(w.Status), 64))
	}
	st, err := model.ParseStatus(raw)
	if err != nil {
		return Record{}, fmt.Errorf("%w: ArchiveResult %v", ErrInvalid, err)
	}
	ar := &ArchiveResult{
		Status:    st,
		OutputStr: lenientString(w.OutputStr),
		Error:     lenientString(w.Error),
	}
	if len(w.OutputJSON) > 0 && !bytes.Equal(w.OutputJSON, []byte("null")) {
		ar.OutputJSON = append(json.RawMessage(nil), w.OutputJSON...)
	}
	return Record{Type: TypeArchiveResult, ArchiveResult: ar}, nil
}

func (w *wire) snapshot() (Record, error) {
	if !present(w.URL) && (present(w.ID) || present(w.Title)) {
		return w.snapshotUpdate()
	}
	url, ok := nonEmptyString(w.URL)
	if !ok {
		return Record{}, fmt.Errorf("%w: Snapshot url %s: must be a non-empty string (or, to update the current snapshot, no url and its id or title)", ErrInvalid, shown(w.URL))
	}
	s := &Snapshot{URL: url}
	if present(w.Depth) {
		d, err := strconv.Atoi(string(w.Depth))
		if err != nil || d < 0 {
			return Record{}, fmt.Errorf("%w: Snapshot depth %s: must be an integer >= 0", ErrInvalid, shown(w.Depth))
		}
		s.Depth = d
	}
	if present(w.Parent) {
		if err := json.Unmarshal(w.Parent, &s.Parent); err != nil {
			return Record{}, fmt.Errorf("%w: Snapshot parent %s: must be a string (the URL of the page it was found on)", ErrInvalid, shown(w.Parent))
		}
	}
	return Record{Type: TypeSnapshot, Snapshot: s}, nil
}

// snapshotUpdate is a Snapshot record without a url: an update of the
// current snapshot by id and/or title.
func (w *wire) snapshotUpdate() (Record, error) {
	s := &Snapshot{}
	if present(w.ID) {
		id, ok := nonEmptyString(w.ID)
		if !ok {
			return Record{}, fmt.Errorf("%w: Snapshot id %s: must be a non-empty string (the hook's --snapshot-id)", ErrInvalid, shown(w.ID))
		}
		s.ID = id
	}
	if present(w.Title) {
		if err := json.Unmarshal(w.Title, &s.Title); err != nil {
			return Record{}, fmt.Errorf("%w: Snapshot title %s: must be a string", ErrInvalid, shown(w.Title))
		}
	}
	return Record{Type: TypeSnapshot, Snapshot: s}, nil
}

func (w *wire) tag() (Record, error) {
	name, ok := nonEmptyString(w.Name)
	if !ok {
		return Record{}, fmt.Errorf("%w: Tag name %s: must be a non-empty string", ErrInvalid, shown(w.Name))
	}
	if n := utf8.RuneCountInString(name); n > MaxTagRunes {
		return Record{}, fmt.Errorf("%w: Tag name %s: %d characters, at most %d (ArchiveBox's Tag.name)", ErrInvalid, shown(w.Name), n, MaxTagRunes)
	}
	return Record{Type: TypeTag, Tag: &Tag{Name: name}}, nil
}

func (w *wire) response() (Record, error) {
	url, ok := nonEmptyString(w.URL)
	if !ok {
		return Record{}, fmt.Errorf("%w: Response url %s: must be a non-empty string", ErrInvalid, shown(w.URL))
	}
	r := &model.Response{URL: url}
	if !present(w.Status) {
		return Record{}, fmt.Errorf("%w: Response status: required (HTTP status, 0 for no response)", ErrInvalid)
	}
	code, err := strconv.Atoi(string(w.Status))
	if err != nil || code < 0 || code > 999 {
		return Record{}, fmt.Errorf("%w: Response status %s: must be an integer in 0..999", ErrInvalid, shown(w.Status))
	}
	r.Status = code
	if present(w.Bytes) {
		n, err := strconv.ParseInt(string(w.Bytes), 10, 64)
		if err != nil || n < 0 {
			return Record{}, fmt.Errorf("%w: Response bytes %s: must be an integer >= 0", ErrInvalid, shown(w.Bytes))
		}
		r.Bytes = n
	}
	if present(w.WgetCode) {
		if err := json.Unmarshal(w.WgetCode, &r.WgetCode); err != nil {
			return Record{}, fmt.Errorf("%w: Response wget_code %s: must be a string", ErrInvalid, shown(w.WgetCode))
		}
	}
	if present(w.Requisite) {
		if err := json.Unmarshal(w.Requisite, &r.Requisite); err != nil {
			return Record{}, fmt.Errorf("%w: Response requisite %s: must be true or false", ErrInvalid, shown(w.Requisite))
		}
	}
	if present(w.Reused) {
		if err := json.Unmarshal(w.Reused, &r.Reused); err != nil {
			return Record{}, fmt.Errorf("%w: Response reused %s: must be true or false", ErrInvalid, shown(w.Reused))
		}
		if r.Reused && !r.Requisite {
			return Record{}, fmt.Errorf("%w: Response reused true: only a requisite (\"requisite\": true) can be reused", ErrInvalid)
		}
	}
	return Record{Type: TypeResponse, Response: r}, nil
}

// present reports whether a raw field was given and is not null.
func present(raw json.RawMessage) bool {
	return len(raw) > 0 && !bytes.Equal(raw, []byte("null"))
}

// nonEmptyString decodes raw as a non-empty JSON string.
func nonEmptyString(raw json.RawMessage) (string, bool) {
	var s string
	if !present(raw) || json.Unmarshal(raw, &s) != nil || s == "" {
		return "", false
	}
	return s, true
}

// shown renders a raw field for an error message.
func shown(raw json.RawMessage) string {
	if len(raw) == 0 {
		return "(missing)"
	}
	return truncate(string(raw), 32)
}

// lenientString returns a JSON string's value, "" for absent or null, and the
// compact JSON text of any other value: a hook printing a structured "error"
// or "output_str" must not lose its status over it.
func lenientString(raw json.RawMessage) string {
	if len(raw) == 0 || bytes.Equal(raw, []byte("null")) {
		return ""
	}
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s
	}
	var buf bytes.Buffer
	if json.Compact(&buf, raw) == nil {
		return buf.String()
	}
	return string(raw)
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "..."
}
