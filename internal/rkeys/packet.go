package rkeys

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/archiveflow/archiveflow/internal/model"
)

// PacketType is the `type` of an IDENT_log packet.
type PacketType string

// ArchiveBot's packet types.
const (
	PacketStdout   PacketType = "stdout"
	PacketDownload PacketType = "download"
	PacketIgnore   PacketType = "ignore"
)

// Packet is one IDENT_log entry. Which fields are encoded depends on Type,
// matching ArchiveBot's pipeline exactly:
//
//	stdout   {"type","ts" (integer seconds),"message"}
//	download {"type","ts" (float seconds),"url","response_code" (integer),
//	          "wget_code","is_error","is_warning" (booleans)}
//	ignore   {"type","ts" (float seconds),"url","pattern","source"}
type Packet struct {
	Type         PacketType
	TS           time.Time // zero = now
	Message      string
	URL          string
	ResponseCode int
	WgetCode     string
	IsError      bool
	IsWarning    bool
	Pattern      string
	Source       string
}

// Stdout returns a stdout packet (a human log line).
func Stdout(ts time.Time, message string) Packet {
	return Packet{Type: PacketStdout, TS: ts, Message: message}
}

// Download returns a download packet for one fetch, with is_error and
// is_warning computed by ArchiveBot's rules (model.Response).
func Download(ts time.Time, r model.Response) Packet {
	return Packet{
		Type: PacketDownload, TS: ts, URL: r.URL, ResponseCode: r.Status, WgetCode: r.FetcherCode(),
		IsError: r.IsError(), IsWarning: r.IsWarning(),
	}
}

type stdoutWire struct {
	Type    PacketType `json:"type"`
	TS      int64      `json:"ts"`
	Message string     `json:"message"`
}

type downloadWire struct {
	Type         PacketType `json:"type"`
	TS           float64    `json:"ts"`
	URL          string     `json:"url"`
	ResponseCode int        `json:"response_code"`
	WgetCode     string     `json:"wget_code"`
	IsError      bool       `json:"is_error"`
	IsWarning    bool       `json:"is_warning"`
}

type ignoreWire struct {
	Type    PacketType `json:"type"`
	TS      float64    `json:"ts"`
	URL     string     `json:"url"`
	Pattern string     `json:"pattern"`
	Source  string     `json:"source,omitempty"`
}

func floatTS(t time.Time) float64 { return float64(t.UnixMicro()) / 1e6 }

func (p Packet) wire() (any, error) {
	switch p.Type {
	case PacketStdout:
		return stdoutWire{p.Type, p.TS.Unix(), p.Message}, nil
	case PacketDownload:
		return downloadWire{p.Type, floatTS(p.TS), p.URL, p.ResponseCode, p.WgetCode, p.IsError, p.IsWarning}, nil
	case PacketIgnore:
		return ignoreWire{p.Type, floatTS(p.TS), p.URL, p.Pattern, p.Source}, nil
	}
	return nil, fmt.Errorf("log packet type %q: must be stdout, download or ignore", p.Type)
}

// encodeCompact renders v as compact JSON without HTML escaping.
func encodeCompact(v any) (string, error) {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return "", err
	}
	return strings.TrimSuffix(b.String(), "\n"), nil
}

const truncMarker = " [truncated by archiveflow]"

// Encode renders p as compact JSON no longer than limit bytes, truncating
// the message (stdout) or url/pattern (download, ignore) with a marker.
func (p Packet) Encode(limit int) (string, error) {
	for attempt := 0; attempt < 4; attempt++ {
		w, err := p.wire()
		if err != nil {
			return "", err
		}
		out, err := encodeCompact(w)
		if err != nil {
			return "", fmt.Errorf("encode %s packet: %w", p.Type, err)
		}
		over := len(out) - limit
		if over <= 0 {
			return out, nil
		}
		// Escaping can make the encoding longer than the text; cut the
		// excess (plus the marker) and retry until it fits.
		cut := over + len(truncMarker) + 8*attempt
		switch p.Type {
		case PacketStdout:
			p.Message = shorten(p.Message, cut)
		default:
			if len(p.Pattern) > len(p.URL) {
				p.Pattern = shorten(p.Pattern, cut)
			} else {
				p.URL = shorten(p.URL, cut)
			}
		}
	}
	return "", fmt.Errorf("encode %s packet: cannot fit in %d bytes", p.Type, limit)
}

// shorten drops at least cut bytes from the end of s (on a rune boundary)
// and appends the truncation marker.
func shorten(s string, cut int) string {
	keep := len(s) - cut
	if keep < 0 {
		keep = 0
	}
	return truncateUTF8(s, keep) + truncMarker
}

// truncateUTF8 returns at most n bytes of s without splitting a rune.
func truncateUTF8(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}

// DecodePacket parses an IDENT_log member. Errors name the problem.
func DecodePacket(raw string) (Packet, error) {
	var w struct {
		Type         PacketType `json:"type"`
		TS           *float64   `json:"ts"`
		Message      string     `json:"message"`
		URL          string     `json:"url"`
		ResponseCode int        `json:"response_code"`
		WgetCode     string     `json:"wget_code"`
		IsError      bool       `json:"is_error"`
		IsWarning    bool       `json:"is_warning"`
		Pattern      string     `json:"pattern"`
		Source       string     `json:"source"`
	}
	if err := json.Unmarshal([]byte(raw), &w); err != nil {
		return Packet{}, fmt.Errorf("log packet %.80q: %w: %v", raw, errMalformed, err)
	}
	switch w.Type {
	case PacketStdout, PacketDownload, PacketIgnore:
	default:
		return Packet{}, fmt.Errorf("log packet %.80q: type %q: %w: must be stdout, download or ignore", raw, w.Type, errMalformed)
	}
	if w.TS == nil {
		return Packet{}, fmt.Errorf("log packet %.80q: %w: ts missing", raw, errMalformed)
	}
	ts := time.UnixMicro(int64(*w.TS * 1e6))
	return Packet{
		Type: w.Type, TS: ts, Message: w.Message, URL: w.URL, ResponseCode: w.ResponseCode,
		WgetCode: w.WgetCode, IsError: w.IsError, IsWarning: w.IsWarning, Pattern: w.Pattern, Source: w.Source,
	}, nil
}
