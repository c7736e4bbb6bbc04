package jsonl

import (
	"encoding/json"
	"fmt"

	"github.com/archiveflow/archiveflow/internal/model"
)

// MarshalJSON encodes r as the object a hook prints on stdout: "type",
// then the fields of its record type, as ParseLine reads them back. It is
// the writer of the format (internal/builtin/hookio prints through it), so
// the writer and the reader share one set of record types.
func (r Record) MarshalJSON() ([]byte, error) {
	var v any
	switch {
	case r.Type == TypeArchiveResult && r.ArchiveResult != nil:
		v = struct {
			Type Type `json:"type"`
			*ArchiveResult
		}{r.Type, r.ArchiveResult}
	case r.Type == TypeSnapshot && r.Snapshot != nil:
		v = struct {
			Type Type `json:"type"`
			*Snapshot
		}{r.Type, r.Snapshot}
	case r.Type == TypeTag && r.Tag != nil:
		v = struct {
			Type Type `json:"type"`
			*Tag
		}{r.Type, r.Tag}
	case r.Type == TypeResponse && r.Response != nil:
		v = struct {
			Type Type `json:"type"`
			*model.Response
		}{r.Type, r.Response}
	default:
		return nil, fmt.Errorf("encode %s record: %w: its %s fields are missing", r.Type, ErrInvalid, r.Type)
	}
	return json.Marshal(v)
}
