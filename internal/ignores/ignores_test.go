package ignores

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestValidate(t *testing.T) {
	cases := []struct {
		pattern string
		want    string // "" = valid
	}{
		{`\.jpg$`, ""},
		{`^https?://{primary_netloc}/login`, ""},
		{`(?i)/calendar/\d{4}`, ""},
		{``, "must not be empty"},
		{`foo(?=bar)`, `lookahead "(?=", which is Python-only syntax`},
		{`(?<!x)y`, "negative lookbehind"},
		{`(?<=x)y`, "lookbehind"},
		{`(a)\1`, "backreference"},
		{`(?P<n>a)(?P=n)`, "named backreference"},
		{`[unclosed`, "not a valid Go RE2 regular expression: error parsing regexp: missing closing ]"},
	}
	for _, tc := range cases {
		t.Run(tc.pattern, func(t *testing.T) {
			err := Validate(tc.pattern)
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

func TestSetExpandsPlaceholders(t *testing.T) {
	s, err := NewSet([]string{`^https?://{primary_netloc}/private/`, `\.iso$`}, "https://ex.am.ple:8443/start?q=1")
	require.NoError(t, err)
	p, ok := s.Match("https://ex.am.ple:8443/private/x")
	assert.True(t, ok)
	assert.Equal(t, `^https?://{primary_netloc}/private/`, p)
	_, ok = s.Match("https://exxamxple:8443/private/x")
	assert.False(t, ok, "the netloc is quoted, its dots are literal")
	_, ok = s.Match("https://other/a.iso")
	assert.True(t, ok)
	_, err = NewSet([]string{`a(?!b)`}, "http://x/")
	assert.Error(t, err)
}
