package jsonl

import (
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/archiveflow/archiveflow/internal/model"
)

func TestParseLineRecords(t *testing.T) {
	tests := []struct {
		name string
		line string
		want Record
	}{
		{"archive result minimal", `{"type":"ArchiveResult","status":"succeeded","output_str":"index.html"}`,
			Record{Type: TypeArchiveResult, ArchiveResult: &ArchiveResult{Status: model.StatusSucceeded, OutputStr: "index.html"}}},
		{"archive result full", `  {"type":"ArchiveResult","status":"failed","output_str":"x","output_json":{"a":1},"error":"boom"}  `,
			Record{Type: TypeArchiveResult, ArchiveResult: &ArchiveResult{Status: model.StatusFailed, OutputStr: "x", OutputJSON: []byte(`{"a":1}`), Error: "boom"}}},
		{"archive result structured error kept as JSON text", `{"type":"ArchiveResult","status":"skipped","error":{"code": 3}}`,
			Record{Type: TypeArchiveResult, ArchiveResult: &ArchiveResult{Status: model.StatusSkipped, Error: `{"code":3}`}}},
		{"archive result null fields", `{"type":"ArchiveResult","status":"noresults","output_str":null,"output_json":null,"error":null}`,
			Record{Type: TypeArchiveResult, ArchiveResult: &ArchiveResult{Status: model.StatusNoResults}}},
		{"snapshot", `{"type":"Snapshot","url":"https://example.com/a","depth":2}`,
			Record{Type: TypeSnapshot, Snapshot: &Snapshot{URL: "https://example.com/a", Depth: 2}}},
		{"snapshot default depth", `{"type":"Snapshot","url":"https://example.com/"}`,
			Record{Type: TypeSnapshot, Snapshot: &Snapshot{URL: "https://example.com/"}}},
		{"snapshot with parent", `{"type":"Snapshot","url":"https://example.com/b","depth":1,"parent":"https://example.com/"}`,
			Record{Type: TypeSnapshot, Snapshot: &Snapshot{URL: "https://example.com/b", Depth: 1, Parent: "https://example.com/"}}},
		{"snapshot update: id and title, no url", `{"type":"Snapshot","id":"5678-uuid","title":"Example Page"}`,
			Record{Type: TypeSnapshot, Snapshot: &Snapshot{ID: "5678-uuid", Title: "Example Page"}}},
		{"snapshot update: title only", `{"type":"Snapshot","title":"T"}`,
			Record{Type: TypeSnapshot, Snapshot: &Snapshot{Title: "T"}}},
		{"outlink with a title stays an outlink", `{"type":"Snapshot","url":"https://e.com/x","title":"X"}`,
			Record{Type: TypeSnapshot, Snapshot: &Snapshot{URL: "https://e.com/x"}}}, // its title is not kept
		{"tag", `{"type":"Tag","name":"news"}`, Record{Type: TypeTag, Tag: &Tag{Name: "news"}}},
		{"tag of 100 characters", `{"type":"Tag","name":"` + strings.Repeat("é", 100) + `"}`, Record{Type: TypeTag, Tag: &Tag{Name: strings.Repeat("é", 100)}}},
		{"response", `{"type":"Response","url":"https://e.com/","status":404,"bytes":512,"wget_code":"RETRFINISHED"}`,
			Record{Type: TypeResponse, Response: &model.Response{URL: "https://e.com/", Status: 404, Bytes: 512, WgetCode: "RETRFINISHED"}}},
		{"response reused requisite", `{"type":"Response","url":"https://e.com/a.css","status":200,"bytes":67,"requisite":true,"reused":true}`,
			Record{Type: TypeResponse, Response: &model.Response{URL: "https://e.com/a.css", Status: 200, Bytes: 67, Requisite: true, Reused: true}}},
		{"response network error", `{"type":"Response","url":"https://e.com/","status":0}`,
			Record{Type: TypeResponse, Response: &model.Response{URL: "https://e.com/"}}},
		{"unknown fields ignored", `{"type":"Tag","name":"n","extra":[1,2]}`, Record{Type: TypeTag, Tag: &Tag{Name: "n"}}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := ParseLine([]byte(tc.line))
			require.NoError(t, err)
			assert.Equal(t, tc.want, got)
		})
	}
}

func TestParseLineRejects(t *testing.T) {
	tests := []struct {
		name string
		line string
		want error
		msg  string
	}{
		{"empty", ``, ErrNotJSON, ""},
		{"plain text", `downloading https://example.com`, ErrNotJSON, ""},
		{"json array", `[1,2]`, ErrNotJSON, ""},
		{"broken json", `{"type":"Tag",`, ErrNotJSON, ""},
		{"no type", `{"status":"succeeded"}`, ErrNoType, ""},
		{"numeric type", `{"type":3}`, ErrNoType, ""},
		{"empty type", `{"type":""}`, ErrNoType, ""},
		{"unknown type", `{"type":"Crawl"}`, ErrUnknownType, `"Crawl"`},
		{"field names are case-sensitive: Type", `{"Type":"ArchiveResult","status":"succeeded"}`, ErrNoType, ""},
		{"field names are case-sensitive: Status", `{"type":"ArchiveResult","Status":"succeeded"}`, ErrInvalid, "status"},
		{"unknown status", `{"type":"ArchiveResult","status":"done"}`, ErrInvalid, `"done"`},
		{"missing status", `{"type":"ArchiveResult","output_str":"x"}`, ErrInvalid, "status"},
		{"numeric status", `{"type":"ArchiveResult","status":1}`, ErrInvalid, "must be a string"},
		{"snapshot without url", `{"type":"Snapshot","depth":1}`, ErrInvalid, "url"},
		{"snapshot negative depth", `{"type":"Snapshot","url":"u","depth":-1}`, ErrInvalid, "depth -1"},
		{"snapshot fractional depth", `{"type":"Snapshot","url":"u","depth":1.5}`, ErrInvalid, "depth 1.5"},
		{"snapshot parent not a string", `{"type":"Snapshot","url":"u","parent":3}`, ErrInvalid, "parent 3"},
		{"tag without name", `{"type":"Tag"}`, ErrInvalid, "name"},
		{"tag over 100 characters", `{"type":"Tag","name":"` + strings.Repeat("a", 101) + `"}`, ErrInvalid, "101 characters, at most 100"},
		{"snapshot update with an empty id", `{"type":"Snapshot","id":"","title":"T"}`, ErrInvalid, "id"},
		{"snapshot update with a numeric title", `{"type":"Snapshot","id":"x","title":3}`, ErrInvalid, "title 3"},
		{"response without status", `{"type":"Response","url":"u"}`, ErrInvalid, "required"},
		{"response status out of range", `{"type":"Response","url":"u","status":1000}`, ErrInvalid, "0..999"},
		{"response negative bytes", `{"type":"Response","url":"u","status":200,"bytes":-5}`, ErrInvalid, "bytes -5"},
		{"response url wrong type", `{"type":"Response","url":5,"status":200}`, ErrInvalid, "Response"},
		{"response reused not a requisite", `{"type":"Response","url":"u","status":200,"reused":true}`, ErrInvalid, "only a requisite"},
		{"response reused wrong type", `{"type":"Response","url":"u","status":200,"requisite":true,"reused":1}`, ErrInvalid, "reused 1"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := ParseLine([]byte(tc.line))
			require.ErrorIs(t, err, tc.want)
			assert.Contains(t, err.Error(), tc.msg)
		})
	}
}

func TestParseLineNonUTF8(t *testing.T) {
	line := []byte("{\"type\":\"ArchiveResult\",\"status\":\"succeeded\",\"output_str\":\"a\xff\xfeb\"}")
	rec, err := ParseLine(line)
	require.NoError(t, err)
	assert.True(t, utf8.ValidString(rec.ArchiveResult.OutputStr))
	assert.Equal(t, "a\uFFFD\uFFFDb", rec.ArchiveResult.OutputStr)

	_, err = ParseLine([]byte("\xff\xfe{\"type\""))
	require.ErrorIs(t, err, ErrNotJSON)
}

type line struct {
	text      string
	truncated bool
}

func split(t *testing.T, limit int, chunks ...string) []line {
	t.Helper()
	var got []line
	s := &Splitter{Cap: limit, Emit: func(l []byte, tr bool) { got = append(got, line{string(l), tr}) }}
	for _, c := range chunks {
		n, err := s.Write([]byte(c))
		require.NoError(t, err)
		require.Equal(t, len(c), n)
	}
	s.Flush()
	return got
}

func TestSplitter(t *testing.T) {
	tests := []struct {
		name   string
		limit  int
		chunks []string
		want   []line
	}{
		{"one chunk", 10, []string{"a\nbb\n"}, []line{{"a", false}, {"bb", false}}},
		{"line across chunks", 10, []string{"ab", "cd", "e\nf\n"}, []line{{"abcde", false}, {"f", false}}},
		{"crlf stripped", 10, []string{"a\r\n", "b\r", "\n"}, []line{{"a", false}, {"b", false}}},
		{"empty lines kept", 10, []string{"\n\nx\n"}, []line{{"", false}, {"", false}, {"x", false}}},
		{"unterminated last line flushed", 10, []string{"a\nlast"}, []line{{"a", false}, {"last", false}}},
		{"exactly cap", 3, []string{"abc\n"}, []line{{"abc", false}}},
		{"over cap in one chunk", 3, []string{"abcdef\nok\n"}, []line{{"abc", true}, {"ok", false}}},
		{"over cap across chunks", 3, []string{"ab", "cd", "efgh", "ij\nok\n"}, []line{{"abc", true}, {"ok", false}}},
		{"over cap unterminated", 3, []string{"abcdef"}, []line{{"abc", true}}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			assert.Equal(t, tc.want, split(t, tc.limit, tc.chunks...))
		})
	}
}

func TestSplitterBoundedMemory(t *testing.T) {
	const limit = 1024
	s := &Splitter{Cap: limit, Emit: func([]byte, bool) {}}
	chunk := []byte(strings.Repeat("x", 64<<10))
	for range 256 { // 16 MiB without a newline
		_, _ = s.Write(chunk)
	}
	assert.LessOrEqual(t, cap(s.buf), 2*limit, "unfinished line buffer must stay near the cap")
}

func FuzzParseLine(f *testing.F) {
	seeds := []string{
		`{"type":"ArchiveResult","status":"succeeded","output_str":"x"}`,
		`{"type":"Snapshot","url":"https://e.com","depth":1}`,
		`{"type":"Tag","name":"t"}`,
		`{"type":"Response","url":"u","status":200,"bytes":10}`,
		`{"type":"ArchiveResult","status":"nope"}`,
		"{\"type\":\"Tag\",\"name\":\"\xff\"}",
		`not json`, `{}`, `{"type":null}`,
	}
	for _, s := range seeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		rec, err := ParseLine(b)
		if err != nil {
			return
		}
		set := 0
		for _, p := range []bool{rec.ArchiveResult != nil, rec.Snapshot != nil, rec.Tag != nil, rec.Response != nil} {
			if p {
				set++
			}
		}
		if set != 1 {
			t.Fatalf("record %+v: want exactly one payload, got %d", rec, set)
		}
		if rec.ArchiveResult != nil {
			if _, err := model.ParseStatus(string(rec.ArchiveResult.Status)); err != nil {
				t.Fatalf("accepted invalid status: %v", err)
			}
		}
	})
}

func BenchmarkParseLine(b *testing.B) {
	lines := [][]byte{
		[]byte(`{"type":"Response","url":"https://example.com/some/page.html","status":200,"bytes":12345}`),
		[]byte(`{"type":"ArchiveResult","status":"succeeded","output_str":"index.html"}`),
		[]byte(`plain log line that is not json at all`),
	}
	var n int64
	for _, l := range lines {
		n += int64(len(l))
	}
	b.SetBytes(n)
	b.ReportAllocs()
	for b.Loop() {
		for _, l := range lines {
			_, _ = ParseLine(l)
		}
	}
}

func BenchmarkSplitter(b *testing.B) {
	chunk := []byte(strings.Repeat(`{"type":"Response","url":"https://example.com/p","status":200,"bytes":1}`+"\n", 1000))
	s := &Splitter{Emit: func([]byte, bool) {}}
	b.SetBytes(int64(len(chunk)))
	for b.Loop() {
		_, _ = s.Write(chunk)
	}
}
