package scope

import (
	"context"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

type denyAll struct{ substr string }

func (d denyAll) Deny(_ context.Context, u string) (string, bool) {
	if strings.Contains(u, d.substr) {
		return "deny " + d.substr, true
	}
	return "", false
}

func TestJudgeScopeAndFlags(t *testing.T) {
	sc, err := New("http://Example.com/docs/index.html#top", Config{OffsiteOnce: true})
	require.NoError(t, err)
	assert.Equal(t, "http://example.com/docs/index.html", sc.Start())
	j := &Judge{Scope: sc}
	ctx := context.Background()
	cases := []struct {
		name   string
		parent bool
		link   Link
		want   Decision
	}{
		{"same host followed, fragment dropped", false, Link{URL: "HTTP://example.com:80/a#frag"},
			Decision{URL: "http://example.com/a"}},
		{"other host once", false, Link{URL: "http://other.org/x"},
			Decision{URL: "http://other.org/x", NoRecurse: true}},
		{"subdomain is another host by default", false, Link{URL: "http://cdn.example.com/x"},
			Decision{URL: "http://cdn.example.com/x", NoRecurse: true}},
		{"requisite from any host, never followed", false, Link{URL: "http://cdn.net/s.css", Requisite: true},
			Decision{URL: "http://cdn.net/s.css", NoRecurse: true, Requisite: true}},
		{"requisite on the start host is not followed either", false, Link{URL: "http://example.com/s.css", Requisite: true},
			Decision{URL: "http://example.com/s.css", NoRecurse: true, Requisite: true}},
		{"links of an offsite page are not followed", true, Link{URL: "http://example.com/b"},
			Decision{URL: "http://example.com/b", Reason: ReasonNoRecurse}},
		{"mailto is silently not a page", false, Link{URL: "mailto:a@b.c"}, Decision{Reason: ReasonNotHTTP}},
		{"javascript is silently not a page", false, Link{URL: "javascript:void(0)"}, Decision{Reason: ReasonNotHTTP}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			assert.Equal(t, c.want, j.Link(ctx, c.parent, c.link))
		})
	}
	bad := j.Link(ctx, false, Link{URL: "http://exa mple.com/"})
	assert.Equal(t, ReasonInvalid, bad.Reason)
	assert.NotEmpty(t, bad.Detail)
}

func TestScopeFlags(t *testing.T) {
	ctx := context.Background()
	off, err := New("http://example.com/docs/", Config{})
	require.NoError(t, err)
	d := (&Judge{Scope: off}).Link(ctx, false, Link{URL: "http://other.org/"})
	assert.Equal(t, ReasonOutside, d.Reason)
	assert.Contains(t, d.Detail, "other.org")

	sub, err := New("http://example.com/docs/", Config{Subdomains: true, PathPrefix: true})
	require.NoError(t, err)
	j := &Judge{Scope: sub}
	assert.Equal(t, Queued, j.Link(ctx, false, Link{URL: "http://www.example.com/docs/a"}).Reason)
	assert.Equal(t, ReasonOutside, j.Link(ctx, false, Link{URL: "http://example.com/blog/a"}).Reason)
	assert.Equal(t, ReasonOutside, j.Link(ctx, false, Link{URL: "http://notexample.com/docs/a"}).Reason)
}

func TestJudgeOrderDenyRulesIgnores(t *testing.T) {
	sc, err := New("http://example.com/", Config{OffsiteOnce: true})
	require.NoError(t, err)
	rules := MustCompile(Rules{
		{Pattern: `/private/`, Accept: Bool(false)},
		{Pattern: `^http://blog\.other\.org/`, Accept: Bool(true)},
		{Pattern: `/private/but-public`, Accept: Bool(true)},
	})
	ig := CompileIgnores([]string{`{primary_netloc}/tmp/`, `\.pdf$`, `([`}, "http://example.com/")
	assert.Equal(t, []string{`([`}, ig.Invalid())
	j := &Judge{Scope: sc, Rules: rules, Ignores: ig, Deny: denyAll{"/internal/"}}
	ctx := context.Background()

	assert.Equal(t, Decision{URL: "http://example.com/internal/x", Reason: ReasonDenied, Pattern: "deny /internal/"},
		j.Link(ctx, false, Link{URL: "http://example.com/internal/x"}), "the deny policy comes first")
	assert.Equal(t, ReasonOutside, j.Link(ctx, false, Link{URL: "http://example.com/private/x"}).Reason)
	assert.Equal(t, Decision{URL: "http://example.com/private/but-public"},
		j.Link(ctx, false, Link{URL: "http://example.com/private/but-public"}), "last matching accept wins")
	assert.Equal(t, Decision{URL: "http://blog.other.org/a"},
		j.Link(ctx, false, Link{URL: "http://blog.other.org/a"}), "accept=true puts another host in scope, followed")
	assert.Equal(t, Decision{URL: "http://example.com/tmp/a", Reason: ReasonIgnored, Pattern: `{primary_netloc}/tmp/`},
		j.Link(ctx, false, Link{URL: "http://example.com/tmp/a"}), "the pattern is reported as written")
	assert.Equal(t, ReasonIgnored, j.Link(ctx, false, Link{URL: "http://other.org/a.pdf"}).Reason)
	assert.Equal(t, Queued, j.Link(ctx, false, Link{URL: "http://examplexcom.org/tmp/a"}).Reason,
		"{primary_netloc} is the escaped start host, not a wildcard")
}

func TestIgnoresPrimaryURL(t *testing.T) {
	ig := CompileIgnores([]string{`^{primary_url}calendar/`}, "http://example.com/a+b/")
	p, ok := ig.Match("http://example.com/a+b/calendar/2024/")
	assert.True(t, ok)
	assert.Equal(t, `^{primary_url}calendar/`, p)
	_, ok = ig.Match("http://example.com/aab/calendar/")
	assert.False(t, ok, "{primary_url} is quoted: + is not a repetition")
}

func TestRulesLastMatchWinsPerSetting(t *testing.T) {
	rs := MustCompile(Rules{
		{Pattern: `/calendar/`, Skip: Bool(true)},
		{Pattern: `/calendar/2024/0[5-7]/`, Skip: Bool(false)},
		{Pattern: `example`, UA: String("ua-1")},
		{Pattern: `/calendar/`, UA: String("ua-2")},
	})
	got := rs.Eval("http://example.com/calendar/2023/01/")
	assert.True(t, got.Skip)
	assert.Equal(t, 1, got.SkipRule)
	assert.Equal(t, "ua-2", got.UA)
	got = rs.Eval("http://example.com/calendar/2024/06/")
	assert.False(t, got.Skip)
	assert.Zero(t, got.SkipRule)
	got = rs.Eval("http://example.com/other")
	assert.Equal(t, PageRule{UA: "ua-1"}, got)
	assert.Equal(t, PageRule{}, (*RuleSet)(nil).Eval("http://x/"))
}

func TestParseRulesErrorsNameTheRule(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{`[{"pattern": "a(", "skip": true}]`, `rule 1 (pattern "a("): not a valid Go RE2`},
		{`[{"pattern": "a", "skip": true}, {"pattern": "(?<=x)y", "skip": true}]`, `rule 2`},
		{`[{"pattern": "", "skip": true}]`, `rule 1 (pattern ""): pattern must not be empty`},
		{`[{"pattern": "a"}]`, `sets nothing`},
		{`[{"pattern": "a", "ua": "x\ny"}]`, `control characters`},
		{`[{"pattern": "a", "skipp": true}]`, `unknown field "skipp"`},
		{`{"pattern": "a"}`, `decode JSON rule list`},
		{`[] []`, `more than one JSON value`},
	} {
		_, err := ParseRules([]byte(c.in))
		require.ErrorIs(t, err, ErrInvalidRules, c.in)
		assert.Contains(t, err.Error(), c.want, c.in)
	}
	rs, err := ParseRules([]byte(`[{"pattern": "^https?://[^/]+/calendar/", "skip": true}, {"pattern": "m\\.", "ua": "Mobile"}]`))
	require.NoError(t, err)
	assert.Len(t, rs, 2)
	many := make(Rules, MaxRules+1)
	for i := range many {
		many[i] = Rule{Pattern: "a", Skip: Bool(true)}
	}
	assert.ErrorContains(t, many.Validate(), "at most 1000")
}
