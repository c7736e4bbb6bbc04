// Package searchattr owns the custom Temporal search attributes archiveflow
// sets on snapshot and crawl workflows so operators can find and filter runs in the
// Temporal Web UI: their names, types and typed keys. The dev server and the
// docker-compose setup register exactly this list; workflows upsert them.
package searchattr

import (
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/temporal"
)

// Names of the custom search attributes.
const (
	NameIdent = "ArchiveflowIdent"
	NameURL   = "ArchiveflowURL"
	NameStep  = "ArchiveflowStep"
	NameState = "ArchiveflowState"
	NamePool  = "ArchiveflowPool"
	// NamePagesDone and NamePagesQueued are a crawl's pages done
	// (succeeded or failed) and still to fetch (ready or in flight).
	NamePagesDone   = "ArchiveflowPagesDone"
	NamePagesQueued = "ArchiveflowPagesQueued"
)

// Typed keys for workflow.UpsertTypedSearchAttributes and start options.
var (
	Ident = temporal.NewSearchAttributeKeyKeyword(NameIdent)
	URL   = temporal.NewSearchAttributeKeyKeyword(NameURL)
	Step  = temporal.NewSearchAttributeKeyInt64(NameStep)
	State = temporal.NewSearchAttributeKeyKeyword(NameState)
	Pool  = temporal.NewSearchAttributeKeyKeyword(NamePool)

	PagesDone   = temporal.NewSearchAttributeKeyInt64(NamePagesDone)
	PagesQueued = temporal.NewSearchAttributeKeyInt64(NamePagesQueued)
)

// Definition is one search attribute to register with a namespace.
type Definition struct {
	Name string
	Type enumspb.IndexedValueType
}

// All lists every custom search attribute archiveflow uses, in a fixed order.
var All = []Definition{
	{NameIdent, enumspb.INDEXED_VALUE_TYPE_KEYWORD},
	{NameURL, enumspb.INDEXED_VALUE_TYPE_KEYWORD},
	{NameStep, enumspb.INDEXED_VALUE_TYPE_INT},
	{NameState, enumspb.INDEXED_VALUE_TYPE_KEYWORD},
	{NamePool, enumspb.INDEXED_VALUE_TYPE_KEYWORD},
	{NamePagesDone, enumspb.INDEXED_VALUE_TYPE_INT},
	{NamePagesQueued, enumspb.INDEXED_VALUE_TYPE_INT},
}

// Map returns All as the name → type map the operator service API takes.
func Map() map[string]enumspb.IndexedValueType {
	m := make(map[string]enumspb.IndexedValueType, len(All))
	for _, d := range All {
		m[d.Name] = d.Type
	}
	return m
}
