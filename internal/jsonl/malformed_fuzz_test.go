package jsonl

import (
	"errors"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// validLines are one well-formed line per record type.
var validLines = []string{
	`{"type":"ArchiveResult","status":"succeeded","output_str":"index.html"}`,
	`{"type":"Snapshot","url":"https://example.com/a","depth":1}`,
	`{"type":"Tag","name":"news"}`,
	`{"type":"Response","url":"https://example.com/","status":200,"bytes":1234}`,
}

// invalidField is a record whose field breaks its type's rule; the error
// must name the record type and the field.
type invalidField struct {
	line, typ, field string
}

var invalidFields = []invalidField{
	{`{"type":"ArchiveResult","status":"done"}`, "ArchiveResult", "status"},
	{`{"type":"ArchiveResult","status":1}`, "ArchiveResult", "status"},
	{`{"type":"ArchiveResult","status":null}`, "ArchiveResult", "status"},
	{`{"type":"ArchiveResult","status":["succeeded"]}`, "ArchiveResult", "status"},
	{`{"type":"ArchiveResult"}`, "ArchiveResult", "status"},
	{`{"type":"Snapshot"}`, "Snapshot", "url"},
	{`{"type":"Snapshot","url":""}`, "Snapshot", "url"},
	{`{"type":"Snapshot","url":7}`, "Snapshot", "url"},
	{`{"type":"Snapshot","url":"u","depth":-1}`, "Snapshot", "depth"},
	{`{"type":"Snapshot","url":"u","depth":1.5}`, "Snapshot", "depth"},
	{`{"type":"Snapshot","url":"u","depth":"1"}`, "Snapshot", "depth"},
	{`{"type":"Tag"}`, "Tag", "name"},
	{`{"type":"Tag","name":""}`, "Tag", "name"},
	{`{"type":"Tag","name":{}}`, "Tag", "name"},
	{`{"type":"Response","status":200}`, "Response", "url"},
	{`{"type":"Response","url":"u"}`, "Response", "status"},
	{`{"type":"Response","url":"u","status":1000}`, "Response", "status"},
	{`{"type":"Response","url":"u","status":-1}`, "Response", "status"},
	{`{"type":"Response","url":"u","status":"200"}`, "Response", "status"},
	{`{"type":"Response","url":"u","status":200,"bytes":-5}`, "Response", "bytes"},
	{`{"type":"Response","url":"u","status":200,"bytes":"5"}`, "Response", "bytes"},
	{`{"type":"Response","url":"u","status":200,"bytes":1e99}`, "Response", "bytes"},
	{`{"type":"Response","url":"u","status":200,"wget_code":0}`, "Response", "wget_code"},
}

// malformedLines is a corpus of stdout lines that are not valid records:
// every proper prefix of a valid line, lines without a usable type, lines
// of unknown types, and records with invalid fields.
func malformedLines() []string {
	var out []string
	for _, l := range validLines {
		for i := 0; i < len(l)-1; i++ {
			out = append(out, l[:i])
		}
	}
	out = append(out,
		`{}`, `{"type":null}`, `{"type":""}`, `{"type":1}`, `{"type":["Tag"]}`,
		`{"type":"archiveresult","status":"succeeded"}`, `{"type":"Crawl"}`, `{"type":"Tag "}`,
		`[{"type":"Tag","name":"x"}]`, `"{\"type\":\"Tag\"}"`, `null`, "\x00{", "{\"type\":\"Tag\",\"name\":\"x\"", `{"type":"Tag","name":"x"}}`,
		"plain text", "  ", "\t", "# comment", "<html>",
	)
	for _, f := range invalidFields {
		out = append(out, f.line)
	}
	return out
}

func TestMalformedLinesGetClearErrors(t *testing.T) {
	corpus := malformedLines()
	require.GreaterOrEqual(t, len(corpus), 200)
	sentinels := []error{ErrNotJSON, ErrNoType, ErrUnknownType, ErrInvalid}
	for _, line := range corpus {
		rec, err := ParseLine([]byte(line))
		if !assert.Error(t, err, "ParseLine(%q) accepted %+v", line, rec) {
			continue
		}
		matched := 0
		for _, s := range sentinels {
			if errors.Is(err, s) {
				matched++
			}
		}
		assert.Equal(t, 1, matched, "ParseLine(%q): %v wraps exactly one sentinel", line, err)
		assert.NotEmpty(t, err.Error())
	}
	for _, f := range invalidFields {
		_, err := ParseLine([]byte(f.line))
		require.ErrorIs(t, err, ErrInvalid, "line %s", f.line)
		msg := err.Error()
		assert.True(t, strings.Contains(msg, f.typ) && strings.Contains(msg, f.field),
			"the error for %s names the record type %s and the field %s: %q", f.line, f.typ, f.field, msg)
	}
	t.Logf("%d malformed JSONL lines", len(corpus))
}
