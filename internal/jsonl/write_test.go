package jsonl

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/archiveflow/archiveflow/internal/model"
)

// TestMarshalRoundTrip: what the writer prints, the reader reads back as
// the same record.
func TestMarshalRoundTrip(t *testing.T) {
	records := []Record{
		{Type: TypeArchiveResult, ArchiveResult: &ArchiveResult{Status: model.StatusSucceeded, OutputStr: "title.txt", OutputJSON: json.RawMessage(`{"n":1}`)}},
		{Type: TypeArchiveResult, ArchiveResult: &ArchiveResult{Status: model.StatusFailed, Error: "no title"}},
		{Type: TypeSnapshot, Snapshot: &Snapshot{URL: "https://example.com/a", Depth: 2}},
		{Type: TypeSnapshot, Snapshot: &Snapshot{ID: "5678-uuid", Title: "Example Page"}},
		{Type: TypeTag, Tag: &Tag{Name: "news"}},
		{Type: TypeResponse, Response: &model.Response{URL: "https://example.com/", Status: 200, Bytes: 10, WgetCode: "RETRFINISHED"}},
	}
	for _, rec := range records {
		line, err := json.Marshal(rec)
		require.NoError(t, err)
		got, err := ParseLine(line)
		require.NoError(t, err, "%s", line)
		assert.Equal(t, rec, got, "%s", line)
	}
	assert.JSONEq(t, `{"type":"Snapshot","url":"https://example.com/a","depth":2}`, mustMarshal(t, records[2]))
	assert.JSONEq(t, `{"type":"Snapshot","id":"5678-uuid","title":"Example Page"}`, mustMarshal(t, records[3]),
		"an update of the current snapshot, as ArchiveBox's plan prints it: no url, no depth")
}

func TestMarshalRefusesAnIncompleteRecord(t *testing.T) {
	_, err := json.Marshal(Record{Type: TypeTag})
	require.ErrorIs(t, err, ErrInvalid)
	_, err = json.Marshal(Record{Type: "Other", Tag: &Tag{Name: "x"}})
	require.ErrorIs(t, err, ErrInvalid)
}

func mustMarshal(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	require.NoError(t, err)
	return string(b)
}
