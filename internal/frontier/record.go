package frontier

import (
	"crypto/sha256"
	"encoding/binary"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/archiveflow/archiveflow/internal/ident"
)

// record is the decoded packed page record (recordFormat, 32 bytes).
type record struct {
	state, flags, status    uint8
	later                   uint8
	attempts, doneAttempt   uint16
	remaining, linksChunk   uint16
	depth, parent, rules    uint32
	linksBatch, lastSegment uint32
}

func decodeRecord(b []byte) (record, error) {
	if len(b) != recordSize {
		return record{}, fmt.Errorf("page record: %d bytes, want %d", len(b), recordSize)
	}
	be := binary.BigEndian
	r := record{
		state: b[0], flags: b[1], status: b[2], later: b[3],
		attempts: be.Uint16(b[4:]), doneAttempt: be.Uint16(b[6:]),
		remaining: be.Uint16(b[8:]), linksChunk: be.Uint16(b[10:]),
		depth: be.Uint32(b[12:]), parent: be.Uint32(b[16:]), rules: be.Uint32(b[20:]),
		linksBatch: be.Uint32(b[24:]), lastSegment: be.Uint32(b[28:]),
	}
	if r.state < codeReady || int(r.state) > len(States) {
		return r, fmt.Errorf("page record: state code %d unknown", r.state)
	}
	if int(r.status) >= len(statuses) {
		return r, fmt.Errorf("page record: status code %d unknown", r.status)
	}
	return r, nil
}

func (r record) page(id int64, url string) Page {
	return Page{
		ID: id, URL: url, Depth: int(r.depth), Parent: int64(r.parent),
		State: States[r.state-1], Status: statuses[r.status],
		Attempts: int(r.attempts), AttemptsRemaining: int(r.remaining), LaterRetries: int(r.later),
		NoRecurse: r.flags&flagNoRecurse != 0, Requisite: r.flags&flagRequisite != 0,
		Charged:      r.flags&flagCharged != 0,
		RulesVersion: int64(r.rules),
	}
}

// pageURL normalises raw with the ident's normaliser (internal/ident owns
// the normal form: every page URL is normalised as the ident is) and checks
// the length cap. The error wraps ErrInvalidURL.
func pageURL(raw string) (string, error) {
	if raw == "" {
		return "", fmt.Errorf("page url: %w: must not be empty", ErrInvalidURL)
	}
	if len(raw) > 4*MaxURLBytes {
		return "", fmt.Errorf("page url %q… (%d bytes): %w: %w", raw[:64], len(raw), ErrInvalidURL, errTooLong)
	}
	u, err := ident.Normalize(raw)
	if err != nil {
		return "", fmt.Errorf("%w: %w", ErrInvalidURL, err)
	}
	if len(u) > MaxURLBytes {
		return "", fmt.Errorf("page url %q… (%d bytes normalised): %w: %w", u[:64], len(u), ErrInvalidURL, errTooLong)
	}
	return u, nil
}

// errTooLong is a page URL over MaxURLBytes (wrapped with ErrInvalidURL).
var errTooLong = fmt.Errorf("longer than %d bytes", MaxURLBytes)

// fingerprint is the dedupe key of a normalised URL: 8 bytes of SHA-256.
// The first 4 address the linear-hashing bucket; a hit is always verified
// against the stored URL, so a collision never merges two URLs.
func fingerprint(url string) string {
	sum := sha256.Sum256([]byte(url))
	return string(sum[:8])
}

// waiting reports a page waiting for a later retry (StatusWaiting).
func (r record) waiting() bool { return r.state == codeReady && r.status == statusWaiting }

// parseMillis parses a Unix time in milliseconds (a retry zset score).
func parseMillis(s string) (time.Time, error) {
	ms, err := strconv.ParseFloat(s, 64)
	if err != nil {
		return time.Time{}, err
	}
	return time.UnixMilli(int64(ms)), nil
}

// parseCounts decodes a counts reply (counts_reply): the metadata hash
// (HGETALL), the propagation backlog, the pages waiting for a later retry
// and the first one's due time.
func parseCounts(v any) (Counts, error) {
	arr, ok := v.([]any)
	if !ok || len(arr) != 4 {
		return Counts{}, fmt.Errorf("counts reply: unexpected shape %T", v)
	}
	flat, ok := arr[0].([]any)
	if !ok {
		return Counts{}, fmt.Errorf("counts reply: unexpected hash %T", arr[0])
	}
	prop, _ := arr[1].(int64)
	fields := make(map[string]string, len(flat)/2)
	for i := 0; i+1 < len(flat); i += 2 {
		k, _ := flat[i].(string)
		val, _ := flat[i+1].(string)
		fields[k] = val
	}
	c, err := countsFromFields(fields, prop)
	if err != nil {
		return c, err
	}
	c.Waiting, _ = arr[2].(int64)
	if due, _ := arr[3].(string); due != "" {
		if c.RetryAt, err = parseMillis(due); err != nil {
			return c, fmt.Errorf("counts reply: retry at %q: %w", due, err)
		}
	}
	return c, nil
}

// countsFromFields decodes the n:STATE and dDEPTH:STATE fields.
func countsFromFields(fields map[string]string, prop int64) (Counts, error) {
	c := Counts{Propagating: prop, MaxDepth: -1}
	if v, ok := fields["max_depth"]; ok {
		n, err := strconv.Atoi(v)
		if err != nil {
			return c, fmt.Errorf("counts field max_depth=%q: %w", v, err)
		}
		c.MaxDepth = n
	}
	if v, ok := fields["charged"]; ok {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			return c, fmt.Errorf("counts field charged=%q: %w", v, err)
		}
		c.Charged = n
	}
	c.ListPartial = fields["list_partial"] != ""
	byDepth := map[int]*DepthCounts{}
	for k, v := range fields {
		var target *StateCounts
		var name string
		switch {
		case strings.HasPrefix(k, "n:"):
			target, name = &c.StateCounts, k[2:]
			if name == "total" {
				n, err := strconv.ParseInt(v, 10, 64)
				if err != nil {
					return c, fmt.Errorf("counts field %s=%q: %w", k, v, err)
				}
				c.Total = n
				continue
			}
		case strings.HasPrefix(k, "d") && strings.Contains(k, ":"):
			ds, st, _ := strings.Cut(k[1:], ":")
			d, err := strconv.Atoi(ds)
			if err != nil {
				continue // not a depth field
			}
			dc := byDepth[d]
			if dc == nil {
				dc = &DepthCounts{Depth: d}
				byDepth[d] = dc
			}
			target, name = &dc.StateCounts, st
		default:
			continue
		}
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			return c, fmt.Errorf("counts field %s=%q: %w", k, v, err)
		}
		if f := target.field(name); f != nil {
			*f = n
		}
	}
	for _, dc := range byDepth {
		if dc.StateCounts != (StateCounts{}) {
			c.ByDepth = append(c.ByDepth, *dc)
		}
	}
	sort.Slice(c.ByDepth, func(i, j int) bool { return c.ByDepth[i].Depth < c.ByDepth[j].Depth })
	return c, nil
}

// field returns the counter named as in the count fields (a state name,
// succeeded or failed), nil for another name.
func (s *StateCounts) field(name string) *int64 {
	return map[string]*int64{"ready": &s.Ready, "claimed": &s.Claimed, "skipped": &s.Skipped, "done": &s.Done,
		"succeeded": &s.Succeeded, "failed": &s.Failed, "deferred": &s.Deferred}[name]
}

// parsePage decodes a page_reply {id, url, record}.
func parsePage(v any) (Page, error) {
	arr, ok := v.([]any)
	if !ok || len(arr) != 3 {
		return Page{}, fmt.Errorf("page reply: unexpected shape %T", v)
	}
	id, _ := arr[0].(int64)
	url, _ := arr[1].(string)
	raw, _ := arr[2].(string)
	r, err := decodeRecord([]byte(raw))
	if err != nil {
		return Page{}, fmt.Errorf("page %d: %w", id, err)
	}
	return r.page(id, url), nil
}

// replyCode splits a script reply into its code and the rest.
func replyCode(v any) (int64, []any, error) {
	arr, ok := v.([]any)
	if !ok || len(arr) == 0 {
		return 0, nil, fmt.Errorf("script reply: unexpected shape %T", v)
	}
	code, ok := arr[0].(int64)
	if !ok {
		return 0, nil, fmt.Errorf("script reply: code %T", arr[0])
	}
	return code, arr[1:], nil
}

func replyInt(arr []any, i int) int64 {
	if i < len(arr) {
		n, _ := arr[i].(int64)
		return n
	}
	return 0
}

func replyAt(arr []any, i int) any {
	if i < len(arr) {
		return arr[i]
	}
	return nil
}

func stateName(code int64) string {
	if code >= codeReady && int(code) <= len(States) {
		return string(States[code-1])
	}
	return "code " + strconv.FormatInt(code, 10)
}
