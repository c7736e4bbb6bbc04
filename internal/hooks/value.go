package hooks

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"reflect"
	"strconv"
	"strings"
)

// Rules reported when a value does not have its property's type.
const (
	ruleString  = "must be a string"
	ruleBoolean = "must be a boolean (true/false, 1/0, yes/no, on/off)"
	ruleInteger = "must be an integer"
	ruleNumber  = "must be a finite number"
	ruleArray   = "must be a JSON array or a comma-separated list"
	ruleObject  = "must be a JSON object"
)

// typeRule returns the rule a value of type t must follow.
func typeRule(t Type) string {
	switch t {
	case TypeBoolean:
		return ruleBoolean
	case TypeInteger:
		return ruleInteger
	case TypeNumber:
		return ruleNumber
	case TypeArray:
		return ruleArray
	case TypeObject:
		return ruleObject
	}
	return ruleString
}

var errType = errors.New("wrong type")

// decodeValue decodes one JSON value with json.Number numbers.
func decodeValue(raw []byte) (any, error) {
	var v any
	if err := decodeStrict(raw, &v); err != nil {
		return nil, errors.New(describeJSONError(raw, err))
	}
	return v, nil
}

// strictValue converts a decoded JSON value to type t without coercion
// between JSON types (used for config.json defaults and enums).
func strictValue(t Type, v any) (any, error) {
	fail := func() (any, error) { return nil, errors.New(typeRule(t)) }
	switch t {
	case TypeString:
		if s, ok := v.(string); ok {
			return s, nil
		}
	case TypeBoolean:
		if b, ok := v.(bool); ok {
			return b, nil
		}
	case TypeInteger, TypeNumber:
		if _, isString := v.(string); isString {
			return fail()
		}
		if n, err := coerceNumber(t, v); err == nil {
			return n, nil
		}
	case TypeArray:
		if a, ok := v.([]any); ok {
			return a, nil
		}
	case TypeObject:
		if m, ok := v.(map[string]any); ok {
			return m, nil
		}
	}
	return fail()
}

// coerce converts a value from a source (a string from the job or the
// environment, or any value decoded from the config file) to type t.
// Strings are parsed per type; see parseString.
func coerce(t Type, v any) (any, error) {
	if s, ok := v.(string); ok {
		return parseString(t, s)
	}
	switch t {
	case TypeString:
		switch x := v.(type) {
		case bool:
			return strconv.FormatBool(x), nil
		case json.Number:
			return x.String(), nil
		}
		if isNumberKind(v) {
			return fmt.Sprint(v), nil
		}
	case TypeBoolean:
		if b, ok := v.(bool); ok {
			return b, nil
		}
	case TypeInteger, TypeNumber:
		return coerceNumber(t, v)
	case TypeArray, TypeObject:
		return coerceComposite(t, v)
	}
	return nil, errType
}

// parseString parses a string value for type t. Booleans accept
// true/false/1/0/yes/no/on/off case-insensitively; integers and numbers are
// decimal (surrounding space ignored); arrays are a JSON array or, when the
// string does not start with '[', a comma-separated list of strings (each
// trimmed; the empty string is the empty list); objects are JSON.
func parseString(t Type, s string) (any, error) {
	switch t {
	case TypeString:
		return s, nil
	case TypeBoolean:
		switch strings.ToLower(strings.TrimSpace(s)) {
		case "true", "1", "yes", "on":
			return true, nil
		case "false", "0", "no", "off":
			return false, nil
		}
	case TypeInteger, TypeNumber:
		return coerceNumber(t, json.Number(strings.TrimSpace(s)))
	case TypeArray:
		trimmed := strings.TrimSpace(s)
		if strings.HasPrefix(trimmed, "[") {
			v, err := decodeValue([]byte(trimmed))
			if err != nil {
				return nil, err
			}
			if a, ok := v.([]any); ok {
				return a, nil
			}
			return nil, errType
		}
		if trimmed == "" {
			return []any{}, nil
		}
		parts := strings.Split(s, ",")
		list := make([]any, len(parts))
		for i, p := range parts {
			list[i] = strings.TrimSpace(p)
		}
		return list, nil
	case TypeObject:
		v, err := decodeValue([]byte(s))
		if err != nil {
			return nil, err
		}
		if m, ok := v.(map[string]any); ok {
			return m, nil
		}
	}
	return nil, errType
}

// coerceNumber converts any numeric value (json.Number, Go integer and
// float kinds) to int64 for integer or float64 for number.
func coerceNumber(t Type, v any) (any, error) {
	var f float64
	switch x := v.(type) {
	case json.Number:
		if t == TypeInteger {
			if i, err := x.Int64(); err == nil {
				return i, nil
			}
		}
		parsed, err := strconv.ParseFloat(string(x), 64)
		if err != nil {
			return nil, errType
		}
		f = parsed
	default:
		rv := reflect.ValueOf(v)
		switch {
		case !rv.IsValid():
			return nil, errType
		case rv.CanInt():
			if t == TypeInteger {
				return rv.Int(), nil
			}
			f = float64(rv.Int())
		case rv.CanUint():
			u := rv.Uint()
			if t == TypeInteger && u <= math.MaxInt64 {
				return int64(u), nil
			}
			f = float64(u)
		case rv.CanFloat():
			f = rv.Float()
		default:
			return nil, errType
		}
	}
	if math.IsNaN(f) || math.IsInf(f, 0) {
		return nil, errType
	}
	if t == TypeNumber {
		return f, nil
	}
	if f != math.Trunc(f) || f < math.MinInt64 || f >= math.MaxInt64 {
		return nil, errType
	}
	return int64(f), nil
}

func isNumberKind(v any) bool {
	rv := reflect.ValueOf(v)
	return rv.IsValid() && (rv.CanInt() || rv.CanUint() || rv.CanFloat())
}

// coerceComposite normalises a slice or map (e.g. from viper) through a
// JSON round trip so its elements have the same shapes as config.json's.
func coerceComposite(t Type, v any) (any, error) {
	rv := reflect.ValueOf(v)
	if !rv.IsValid() {
		return nil, errType
	}
	kind := rv.Kind()
	if t == TypeArray && kind != reflect.Slice && kind != reflect.Array ||
		t == TypeObject && kind != reflect.Map {
		return nil, errType
	}
	data, err := json.Marshal(v)
	if err != nil {
		return nil, errType
	}
	out, err := decodeValue(data)
	if err != nil {
		return nil, errType
	}
	if out == nil { // a nil slice or map
		if t == TypeArray {
			return []any{}, nil
		}
		return map[string]any{}, nil
	}
	return out, nil
}

// formatEnv renders a resolved value for the hook's environment: booleans
// True/False, integers in decimal, numbers in their shortest form, arrays
// and objects as compact JSON, strings unchanged.
func formatEnv(v any) string {
	switch x := v.(type) {
	case string:
		return x
	case bool:
		if x {
			return "True"
		}
		return "False"
	case int64:
		return strconv.FormatInt(x, 10)
	case float64:
		return formatFloat(x)
	}
	return compactJSON(v)
}

// formatFloat renders f in the shortest form that round-trips (JSON style:
// 0.5, 2, 1e+21).
func formatFloat(f float64) string {
	if data, err := json.Marshal(f); err == nil {
		return string(data)
	}
	return strconv.FormatFloat(f, 'g', -1, 64)
}

// compactJSON encodes v as compact JSON without HTML escaping.
func compactJSON(v any) string {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return fmt.Sprint(v)
	}
	return strings.TrimSuffix(buf.String(), "\n")
}

// equalValue compares two normalised values: numbers numerically, anything
// else by its JSON encoding.
func equalValue(a, b any) bool {
	fa, aNum := asFloat(a)
	fb, bNum := asFloat(b)
	if aNum || bNum {
		return aNum && bNum && fa == fb
	}
	return compactJSON(a) == compactJSON(b)
}

func asFloat(v any) (float64, bool) {
	switch x := v.(type) {
	case int64:
		return float64(x), true
	case float64:
		return x, true
	case json.Number:
		f, err := x.Float64()
		return f, err == nil
	}
	return 0, false
}
