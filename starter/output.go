package main

import (
	"encoding/json"
	"fmt"
	"io"
	"net/url"
	"strings"

	"github.com/archiveflow/archiveflow/config"
)

// writeJSON prints v as indented JSON.
func writeJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	if err := enc.Encode(v); err != nil {
		return fmt.Errorf("encode JSON output: %w", err)
	}
	return nil
}

// uiLink is the Temporal Web UI page of the job's workflow.
func uiLink(t config.Temporal, ident string) string {
	base := strings.TrimRight(t.UIURL, "/")
	if base == "" {
		return ""
	}
	return fmt.Sprintf("%s/namespaces/%s/workflows/%s", base, url.PathEscape(t.Namespace), url.PathEscape(ident))
}

// humanBytes renders n bytes with a binary unit.
func humanBytes(n int64) string {
	const unit = 1024
	if n < unit {
		return fmt.Sprintf("%d B", n)
	}
	div, exp := int64(unit), 0
	for m := n / unit; m >= unit; m /= unit {
		div *= unit
		exp++
	}
	return fmt.Sprintf("%.1f %ciB", float64(n)/float64(div), "KMGTPE"[exp])
}
