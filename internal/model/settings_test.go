package model

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestValidateIgnore(t *testing.T) {
	cases := []struct {
		pattern string
		want    string // "" = valid
	}{
		{`\.jpg$`, ""},
		{`^https?://{primary_netloc}/login`, ""},
		{`^{primary_url}$`, ""},
		{`(?i)/calendar/\d{4}`, ""},
		{``, "must not be empty"},
		{`  `, "must not be empty"},
		{`foo(?=bar)`, `lookahead "(?=", which is Python-only syntax`},
		{`(?<!x)y`, "negative lookbehind"},
		{`(?<=x)y`, "lookbehind"},
		{`(a)\1`, "backreference"},
		{`(?P<n>a)(?P=n)`, "named backreference"},
		{`[unclosed`, "not a valid Go RE2 regular expression: error parsing regexp: missing closing ]"},
	}
	for _, tc := range cases {
		t.Run(tc.pattern, func(t *testing.T) {
			err := ValidateIgnore(tc.pattern)
			if tc.want == "" {
				assert.NoError(t, err)
				return
			}
			require.Error(t, err)
			assert.Contains(t, err.Error(), tc.want)
			assert.Contains(t, err.Error(), "ignore pattern")
		})
	}
}

func TestSettingsValidate(t *testing.T) {
	cases := []struct {
		name string
		set  Settings
		want string // "" = valid
	}{
		{"zero pauses", Settings{}, ""},
		{"full", Settings{Concurrency: 2, DelayMinMS: 10, DelayMaxMS: 20, UserAgent: "ua", Ignores: []string{`\.css$`}}, ""},
		{"negative concurrency", Settings{Concurrency: -1}, "concurrency -1: must be 0..1000 (0 pauses the job)"},
		{"most concurrency", Settings{Concurrency: MaxConcurrency}, ""},
		{"too much concurrency", Settings{Concurrency: MaxConcurrency + 1}, "concurrency 1001: must be 0..1000"},
		{"absurd concurrency", Settings{Concurrency: 999999}, "concurrency 999999: must be 0..1000"},
		{"negative delay", Settings{DelayMinMS: -1}, "delay_min -1 ms: must be >= 0"},
		{"max below min", Settings{DelayMinMS: 5, DelayMaxMS: 1}, "delay_max 1 ms: must be >= delay_min (5 ms)"},
		{"empty ignore", Settings{Ignores: []string{`\.css$`, ""}}, `ignore pattern "": must not be empty`},
		{"bad ignore", Settings{Ignores: []string{"(["}}, `ignore pattern "([": not a valid Go RE2`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.set.Validate()
			if tc.want == "" {
				assert.NoError(t, err)
				return
			}
			require.Error(t, err)
			assert.Contains(t, err.Error(), tc.want)
		})
	}
}

func TestValidateFetchDepth(t *testing.T) {
	assert.NoError(t, ValidateFetchDepth(FetchShallow))
	assert.NoError(t, ValidateFetchDepth(FetchInf))
	assert.EqualError(t, ValidateFetchDepth("deep"), `fetch_depth "deep": must be shallow or inf`)
}
