package jsonl

import (
	"encoding/json"
	"fmt"
)

// MarshalJSON encodes r as the object a hook prints on stdout: "type",
// then the fields of its record type, as ParseLine reads them back. It is
// the writer of the format (internal/builtin/hookio prints through it), so
// the writer and the reader share one set of record types.
func (r Record) MarshalJSON() ([]byte, error) {
	var fields any // the record type's fields, a non-nil pointer
	switch r.Type {
	case TypeArchiveResult:
		fields = nonNil(r.ArchiveResult)
	case TypeSnapshot:
		fields = nonNil(r.Snapshot)
	case TypeTag:
		fields = nonNil(r.Tag)
	case TypeResponse:
		fields = nonNil(r.Response)
	}
	if fields == nil {
		return nil, fmt.Errorf("encode %s record: %w: its %s fields are missing", r.Type, ErrInvalid, r.Type)
	}
	// The fields' JSON object with "type" in front: records are flat.
	body, err := json.Marshal(fields)
	if err != nil {
		return nil, fmt.Errorf("encode %s record: %w", r.Type, err)
	}
	typ, err := json.Marshal(r.Type)
	if err != nil {
		return nil, fmt.Errorf("encode %s record: %w", r.Type, err)
	}
	out := append([]byte(`{"type":`), typ...)
	if len(body) > 2 {
		out = append(out, ',')
	}
	return append(out, body[1:]...), nil
}

// nonNil returns p as an interface, or nil when p is a nil pointer.
func nonNil[T any](p *T) any {
	if p == nil {
		return nil
	}
	return p
}
