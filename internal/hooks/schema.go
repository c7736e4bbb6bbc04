package hooks

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"regexp"
	"sort"
	"strings"
)

// Type is a JSONSchema value type supported in a plugin's config.json.
type Type string

// Supported property types.
const (
	TypeString  Type = "string"
	TypeBoolean Type = "boolean"
	TypeInteger Type = "integer"
	TypeNumber  Type = "number"
	TypeArray   Type = "array"
	TypeObject  Type = "object"
)

func (t Type) valid() bool {
	switch t {
	case TypeString, TypeBoolean, TypeInteger, TypeNumber, TypeArray, TypeObject:
		return true
	}
	return false
}

// acceptedRuntimes are the names a config.json x-runtimes list must contain
// (one of) for archiveflow to run the plugin's hooks.
var acceptedRuntimes = []string{"archiveflow", "abx-dl"}

// keyPattern is the shape of a config key, an alias and a fallback: a
// portable environment variable name.
var keyPattern = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

// Property is one entry of config.json's "properties".
//
// Values (Default, Enum) are normalised: string, bool, int64 (integer),
// float64 (number), []any and map[string]any (array and object, whose
// elements are as decoded from JSON with json.Number for numbers).
type Property struct {
	Key         string
	Type        Type
	Default     any  // nil when HasDefault is false
	HasDefault  bool // false when "default" is absent or null
	Enum        []any
	Minimum     *float64
	Maximum     *float64
	Pattern     string
	Aliases     []string // x-aliases, in lookup order
	Fallback    string   // x-fallback, "" when absent
	Description string

	re *regexp.Regexp
}

// Schema is a plugin's loaded config.json. A Schema is immutable once
// loaded and safe for concurrent use. The zero value (and the schema of a
// plugin without config.json) declares no keys.
type Schema struct {
	Plugin string
	Path   string // the config.json it was loaded from; "" for an empty schema
	// Runtimes is config.json's x-runtimes; nil when absent.
	Runtimes   []string
	Properties map[string]*Property
	// Binaries is config.json's required_binaries (deps.go).
	Binaries []Binary
	// Requires is config.json's required_plugins: plugins that must be
	// installed and able to run for this one's hooks to run.
	Requires []string

	keys         []string        // sorted property keys
	raw          json.RawMessage // the document, for the JSON round trip
	binariesFile []Binary        // binaries.jsonl beside it (Plan.Binaries crosses the boundary)
}

// Keys returns the declared keys in sorted order.
func (s *Schema) Keys() []string { return append([]string(nil), s.keys...) }

// SupportsRuntime reports whether the schema lets archiveflow run the
// plugin: x-runtimes is absent or empty, or lists "archiveflow" or its alias
// "abx-dl" (case-insensitively).
func (s *Schema) SupportsRuntime() bool {
	if len(s.Runtimes) == 0 {
		return true
	}
	for _, r := range s.Runtimes {
		for _, want := range acceptedRuntimes {
			if strings.EqualFold(strings.TrimSpace(r), want) {
				return true
			}
		}
	}
	return false
}

// LoadSchema reads and parses the config.json at path for plugin. A
// missing file yields an empty schema.
func LoadSchema(path, plugin string) (*Schema, error) {
	data, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return &Schema{Plugin: plugin, Properties: map[string]*Property{}}, nil
	}
	if err != nil {
		return nil, fmt.Errorf("load plugin config %s: %w", path, err)
	}
	return ParseSchema(data, path, plugin)
}

// ParseSchema parses a config.json document; path names it in errors.
//
// Unknown keywords are ignored. A keyword of the wrong shape, an invalid
// pattern or a default that does not match its type is an error naming the
// file, the key and the rule; a JSON syntax error names line and column.
func ParseSchema(data []byte, path, plugin string) (*Schema, error) {
	var top any
	if err := decodeStrict(data, &top); err != nil {
		return nil, fmt.Errorf("load plugin config %s: %s", path, describeJSONError(data, err))
	}
	var doc map[string]json.RawMessage
	if _, isObject := top.(map[string]any); !isObject || json.Unmarshal(data, &doc) != nil {
		return nil, fmt.Errorf("load plugin config %s: top level must be a JSON object, got %s", path, shortJSON(data))
	}
	s := &Schema{Plugin: plugin, Path: path, Properties: map[string]*Property{}, raw: append(json.RawMessage(nil), data...)}
	if raw, ok := doc["x-runtimes"]; ok && !isNull(raw) {
		if err := json.Unmarshal(raw, &s.Runtimes); err != nil {
			return nil, fmt.Errorf("load plugin config %s: x-runtimes must be an array of strings, got %s", path, shortJSON(raw))
		}
	}
	if err := s.parseDependencies(doc); err != nil {
		return nil, fmt.Errorf("load plugin config %s: %w", path, err)
	}
	if raw, ok := doc["properties"]; ok && !isNull(raw) {
		var props map[string]json.RawMessage
		if err := json.Unmarshal(raw, &props); err != nil {
			return nil, fmt.Errorf("load plugin config %s: properties must be an object, got %s", path, shortJSON(raw))
		}
		for key, praw := range props {
			p, err := parseProperty(key, praw)
			if err != nil {
				return nil, fmt.Errorf("load plugin config %s: property %q: %w", path, key, err)
			}
			s.Properties[key] = p
			s.keys = append(s.keys, key)
		}
	}
	sort.Strings(s.keys)
	return s, nil
}

// propertyDoc is the wire shape of one property; every keyword stays raw so
// that a wrong-typed keyword gets a message naming it.
type propertyDoc struct {
	Type        json.RawMessage `json:"type"`
	Default     json.RawMessage `json:"default"`
	Enum        json.RawMessage `json:"enum"`
	Minimum     json.RawMessage `json:"minimum"`
	Maximum     json.RawMessage `json:"maximum"`
	Pattern     json.RawMessage `json:"pattern"`
	Aliases     json.RawMessage `json:"x-aliases"`
	Fallback    json.RawMessage `json:"x-fallback"`
	Description json.RawMessage `json:"description"`
}

func parseProperty(key string, raw json.RawMessage) (*Property, error) {
	if !keyPattern.MatchString(key) {
		return nil, fmt.Errorf("key must match %s (an environment variable name)", keyPattern)
	}
	var d propertyDoc
	if err := json.Unmarshal(raw, &d); err != nil {
		return nil, fmt.Errorf("must be an object (a property schema), got %s", shortJSON(raw))
	}
	p := &Property{Key: key}
	steps := []func(*propertyDoc) error{
		p.parseDefault, p.parseType, p.checkDefault, p.parseEnum,
		p.parseBounds, p.parsePattern, p.parseNames, p.parseDescription,
	}
	for _, step := range steps {
		if err := step(&d); err != nil {
			return nil, err
		}
	}
	return p, nil
}

// parseDefault decodes "default"; null counts as absent.
func (p *Property) parseDefault(d *propertyDoc) error {
	if len(d.Default) == 0 || isNull(d.Default) {
		return nil
	}
	v, err := decodeValue(d.Default)
	if err != nil {
		return fmt.Errorf("default: %w", err)
	}
	p.Default, p.HasDefault = v, true
	return nil
}

// parseType reads "type": a type name, or a list of one type name plus
// "null". Without "type" the type is inferred from the default (string when
// there is none).
func (p *Property) parseType(d *propertyDoc) error {
	if len(d.Type) == 0 || isNull(d.Type) {
		p.Type = inferType(p.Default)
		return nil
	}
	var one string
	if err := json.Unmarshal(d.Type, &one); err == nil {
		p.Type = Type(one)
	} else {
		var many []string
		if err := json.Unmarshal(d.Type, &many); err != nil {
			return fmt.Errorf("type must be a type name or a list of type names, got %s", shortJSON(d.Type))
		}
		var types []string
		for _, t := range many {
			if t != "null" {
				types = append(types, t)
			}
		}
		if len(types) != 1 {
			return fmt.Errorf("type %s: only one type (optionally with \"null\") is supported", d.Type)
		}
		p.Type = Type(types[0])
	}
	if !p.Type.valid() {
		return fmt.Errorf("type %q: must be one of string, boolean, integer, number, array, object", p.Type)
	}
	return nil
}

func inferType(v any) Type {
	switch x := v.(type) {
	case bool:
		return TypeBoolean
	case json.Number:
		if _, err := x.Int64(); err == nil {
			return TypeInteger
		}
		return TypeNumber
	case []any:
		return TypeArray
	case map[string]any:
		return TypeObject
	}
	return TypeString
}

// checkDefault converts the default to the property's type, strictly (a
// JSON string is not accepted for an integer property).
func (p *Property) checkDefault(*propertyDoc) error {
	if !p.HasDefault {
		return nil
	}
	v, err := strictValue(p.Type, p.Default)
	if err != nil {
		return fmt.Errorf("default %s: %w", compactJSON(p.Default), err)
	}
	p.Default = v
	return nil
}

func (p *Property) parseEnum(d *propertyDoc) error {
	if len(d.Enum) == 0 || isNull(d.Enum) {
		return nil
	}
	var items []json.RawMessage
	if err := json.Unmarshal(d.Enum, &items); err != nil {
		return fmt.Errorf("enum must be an array, got %s", shortJSON(d.Enum))
	}
	for _, item := range items {
		v, err := decodeValue(item)
		if err != nil {
			return fmt.Errorf("enum: %w", err)
		}
		if v == nil {
			continue // null in an enum only matters for nullable types
		}
		nv, err := strictValue(p.Type, v)
		if err != nil {
			return fmt.Errorf("enum value %s: %w", shortJSON(item), err)
		}
		p.Enum = append(p.Enum, nv)
	}
	return nil
}

func (p *Property) parseBounds(d *propertyDoc) error {
	var err error
	if p.Minimum, err = parseBound("minimum", d.Minimum); err != nil {
		return err
	}
	if p.Maximum, err = parseBound("maximum", d.Maximum); err != nil {
		return err
	}
	if p.Minimum != nil && p.Maximum != nil && *p.Minimum > *p.Maximum {
		return fmt.Errorf("minimum %s is greater than maximum %s", formatFloat(*p.Minimum), formatFloat(*p.Maximum))
	}
	return nil
}

func parseBound(name string, raw json.RawMessage) (*float64, error) {
	if len(raw) == 0 || isNull(raw) {
		return nil, nil
	}
	var f float64
	if err := json.Unmarshal(raw, &f); err != nil {
		return nil, fmt.Errorf("%s must be a number, got %s", name, shortJSON(raw))
	}
	return &f, nil
}

func (p *Property) parsePattern(d *propertyDoc) error {
	if len(d.Pattern) == 0 || isNull(d.Pattern) {
		return nil
	}
	if err := json.Unmarshal(d.Pattern, &p.Pattern); err != nil {
		return fmt.Errorf("pattern must be a string, got %s", shortJSON(d.Pattern))
	}
	re, err := compilePattern(p.Pattern)
	if err != nil {
		return err
	}
	p.re = re
	return nil
}

// re2Unsupported lists regex syntax that other engines accept and Go's RE2
// does not, to explain a compile failure.
var re2Unsupported = []struct{ token, what string }{
	{"(?=", "lookahead"}, {"(?!", "negative lookahead"},
	{"(?<=", "lookbehind"}, {"(?<!", "negative lookbehind"},
	{"(?>", "atomic groups"}, {`\1`, "backreferences"}, {`\2`, "backreferences"},
	{`\k<`, "named backreferences"}, {"*+", "possessive quantifiers"}, {"++", "possessive quantifiers"},
}

func compilePattern(pattern string) (*regexp.Regexp, error) {
	re, err := regexp.Compile(pattern)
	if err == nil {
		return re, nil
	}
	for _, u := range re2Unsupported {
		if strings.Contains(pattern, u.token) {
			return nil, fmt.Errorf("pattern %q uses %s (%s), which Go's RE2 syntax does not support: %w", pattern, u.what, u.token, err)
		}
	}
	return nil, fmt.Errorf("pattern %q is not a valid RE2 regular expression: %w", pattern, err)
}

// parseNames reads x-aliases and x-fallback.
func (p *Property) parseNames(d *propertyDoc) error {
	if len(d.Aliases) > 0 && !isNull(d.Aliases) {
		if err := json.Unmarshal(d.Aliases, &p.Aliases); err != nil {
			return fmt.Errorf("x-aliases must be an array of strings, got %s", shortJSON(d.Aliases))
		}
		for _, a := range p.Aliases {
			if !keyPattern.MatchString(a) {
				return fmt.Errorf("x-aliases entry %q must match %s", a, keyPattern)
			}
		}
	}
	if len(d.Fallback) > 0 && !isNull(d.Fallback) {
		if err := json.Unmarshal(d.Fallback, &p.Fallback); err != nil {
			return fmt.Errorf("x-fallback must be a string (a key name), got %s", shortJSON(d.Fallback))
		}
		if !keyPattern.MatchString(p.Fallback) {
			return fmt.Errorf("x-fallback %q must match %s", p.Fallback, keyPattern)
		}
		if p.Fallback == p.Key {
			return fmt.Errorf("x-fallback %q names the key itself", p.Fallback)
		}
	}
	return nil
}

func (p *Property) parseDescription(d *propertyDoc) error {
	if len(d.Description) == 0 || isNull(d.Description) {
		return nil
	}
	if err := json.Unmarshal(d.Description, &p.Description); err != nil {
		return fmt.Errorf("description must be a string, got %s", shortJSON(d.Description))
	}
	return nil
}

// schemaWire is the JSON form of a Schema: the plugin, the path and the
// original document, re-parsed on decode.
type schemaWire struct {
	Plugin string          `json:"plugin"`
	Path   string          `json:"path,omitempty"`
	Config json.RawMessage `json:"config,omitempty"`
}

// MarshalJSON encodes the schema as its plugin, path and original
// config.json document, so a Plan can cross a Temporal boundary.
func (s *Schema) MarshalJSON() ([]byte, error) {
	return json.Marshal(schemaWire{Plugin: s.Plugin, Path: s.Path, Config: s.raw})
}

// UnmarshalJSON re-parses the document written by MarshalJSON.
func (s *Schema) UnmarshalJSON(data []byte) error {
	var w schemaWire
	if err := json.Unmarshal(data, &w); err != nil {
		return fmt.Errorf("decode plugin schema: %w", err)
	}
	if len(w.Config) == 0 {
		*s = Schema{Plugin: w.Plugin, Path: w.Path, Properties: map[string]*Property{}}
		return nil
	}
	parsed, err := ParseSchema(w.Config, w.Path, w.Plugin)
	if err != nil {
		return fmt.Errorf("decode plugin schema: %w", err)
	}
	*s = *parsed
	return nil
}

// decodeStrict unmarshals data with json.Number numbers and rejects
// trailing data after the first value.
func decodeStrict(data []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	if err := dec.Decode(v); err != nil {
		return err
	}
	end := dec.InputOffset()
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		rest := data[end:]
		next := int64(len(rest) - len(bytes.TrimLeft(rest, " \t\r\n")))
		return &trailingDataError{offset: end + next + 1}
	}
	return nil
}

// trailingDataError reports data after the top-level value; offset is just
// past its first byte, like json.SyntaxError's.
type trailingDataError struct{ offset int64 }

func (e *trailingDataError) Error() string { return "unexpected data after the top-level value" }

// describeJSONError renders a decoding error with line:column when the
// error carries an offset into data.
func describeJSONError(data []byte, err error) string {
	var syntax *json.SyntaxError
	var typ *json.UnmarshalTypeError
	var trailing *trailingDataError
	switch {
	case errors.As(err, &syntax):
		line, col := lineCol(data, syntax.Offset-1) // Offset is just past the bad byte
		return fmt.Sprintf("JSON syntax error at line %d, column %d: %s", line, col, syntax.Error())
	case errors.As(err, &typ):
		line, col := lineCol(data, typ.Offset-1)
		return fmt.Sprintf("at line %d, column %d: %s", line, col, typ.Error())
	case errors.As(err, &trailing):
		line, col := lineCol(data, trailing.offset-1)
		return fmt.Sprintf("JSON syntax error at line %d, column %d: %s", line, col, trailing.Error())
	case errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF):
		line, col := lineCol(data, int64(len(data)))
		return fmt.Sprintf("JSON syntax error at line %d, column %d: unexpected end of input", line, col)
	}
	return err.Error()
}

// lineCol turns a 0-based byte position into a 1-based line and column.
func lineCol(data []byte, pos int64) (int, int) {
	pos = max(0, min(pos, int64(len(data))))
	before := data[:pos]
	line := bytes.Count(before, []byte{'\n'}) + 1
	col := int(pos) - bytes.LastIndexByte(before, '\n')
	return line, col
}

// shortJSON renders a JSON fragment for an error message, compacted and
// cut to a readable length.
func shortJSON(raw []byte) string {
	const limit = 80
	var buf bytes.Buffer
	s := string(raw)
	if json.Compact(&buf, raw) == nil {
		s = buf.String()
	}
	if len(s) > limit {
		s = s[:limit] + "..."
	}
	return s
}

func isNull(raw json.RawMessage) bool {
	return bytes.Equal(bytes.TrimSpace(raw), []byte("null"))
}
