package netpolicy

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestParseRuleRefusesWhatItCannotMean(t *testing.T) {
	cases := map[string]string{
		"":                 "must not be empty",
		"   ":              "must not be empty",
		"*":                "lone *",
		"10.0.0.0/33":      "not a valid CIDR",
		"10.0.0.1:0":       "port \"0\"",
		"10.0.0.1:70000":   "port \"70000\"",
		"host:http":        "port \"http\"",
		"[::1]":            "[IPv6]:PORT",
		"[::1:6379":        "without ']'",
		"exa mple.com":     "' ' is not allowed",
		"a..b":             "empty label",
		"foo.*.com":        "'*' is not allowed",
		"http://x.com/":    "not a URL",
		"fe80::1%eth0":     "IPv6 zone",
		"[fe80::1%lo]:443": "IPv6 zone",
	}
	for in, want := range cases {
		_, err := ParseRule(in)
		require.Error(t, err, "%q", in)
		assert.Contains(t, err.Error(), want, "%q", in)
	}
}

func TestParseNamesTheEntry(t *testing.T) {
	_, err := Parse([]string{"169.254.0.0/16", "bad host"})
	require.Error(t, err)
	assert.Contains(t, err.Error(), `fetch.deny[1] "bad host"`)
}

func policy(t *testing.T, rules ...string) *Policy {
	t.Helper()
	p, err := Parse(rules)
	require.NoError(t, err)
	return p.WithLookup(func(_ context.Context, host string) ([]netip.Addr, error) {
		switch host {
		case "metadata.example":
			return []netip.Addr{netip.MustParseAddr("169.254.169.254")}, nil
		case "mixed.example":
			return []netip.Addr{netip.MustParseAddr("93.184.216.34"), netip.MustParseAddr("10.1.2.3")}, nil
		case "public.example", "x.corp.example", "corp.example":
			return []netip.Addr{netip.MustParseAddr("93.184.216.34")}, nil
		}
		return nil, errors.New("no such host")
	})
}

func TestCheckURLAfterResolution(t *testing.T) {
	p := policy(t, "169.254.0.0/16", "fd00:ec2::254", "fe80::/10", "10.0.0.0/8", "127.0.0.1:6379", "[::1]:7233", "*.corp.example")
	cases := []struct {
		url, rule string
	}{
		{"http://169.254.169.254/latest/meta-data/", "169.254.0.0/16"},
		{"http://metadata.example/computeMetadata/v1/", "169.254.0.0/16"},
		{"https://[fd00:ec2::254]/", "fd00:ec2::254"},
		{"http://[fe80::1%25eth0]:8080/", "fe80::/10"},
		{"http://[::ffff:169.254.169.254]/", "169.254.0.0/16"},
		{"http://mixed.example/", "10.0.0.0/8"},
		{"http://127.0.0.1:6379/", "127.0.0.1:6379"},
		{"http://[::1]:7233/", "[::1]:7233"},
		{"https://X.Corp.Example./a", "*.corp.example"},
		{"http://public.example/", ""},
		{"http://corp.example/", ""},
		{"http://127.0.0.1:6380/", ""},
		{"http://127.0.0.1/", ""},
		{"http://[::1]:7234/", ""},
	}
	for _, tc := range cases {
		d, err := p.CheckURL(context.Background(), tc.url)
		require.NoError(t, err, tc.url)
		assert.Equal(t, tc.rule != "", d.Denied, tc.url)
		assert.Equal(t, tc.rule, d.Rule, tc.url)
		rule, denied := p.Deny(context.Background(), tc.url)
		assert.Equal(t, tc.rule, rule, tc.url)
		assert.Equal(t, d.Denied, denied, tc.url)
	}
}

func TestReasonNamesRuleAndResolvedAddress(t *testing.T) {
	p := policy(t, "169.254.0.0/16")
	d, err := p.CheckURL(context.Background(), "http://metadata.example/")
	require.NoError(t, err)
	assert.Equal(t, `denied by fetch.deny rule "169.254.0.0/16" (metadata.example resolves to 169.254.169.254)`, d.Reason())
	d, err = p.CheckURL(context.Background(), "http://169.254.169.254/")
	require.NoError(t, err)
	assert.Equal(t, `denied by fetch.deny rule "169.254.0.0/16"`, d.Reason())
}

func TestUnresolvableHostIsNotDeniedButSaysWhy(t *testing.T) {
	p := policy(t, "169.254.0.0/16")
	d, err := p.CheckURL(context.Background(), "http://nowhere.example/")
	require.Error(t, err)
	assert.Contains(t, err.Error(), "resolve nowhere.example")
	assert.False(t, d.Denied)
	_, denied := p.Deny(context.Background(), "http://nowhere.example/")
	assert.False(t, denied)
}

func TestHostRulesNeedNoResolution(t *testing.T) {
	p, err := Parse([]string{"metadata.google.internal", "redis:6379"})
	require.NoError(t, err)
	p = p.WithLookup(func(context.Context, string) ([]netip.Addr, error) {
		t.Fatal("a host rule must decide before any DNS lookup")
		return nil, nil
	})
	for url, rule := range map[string]string{
		"http://metadata.google.internal/":  "metadata.google.internal",
		"http://METADATA.google.internal./": "metadata.google.internal",
		"http://redis:6379/":                "redis:6379",
	} {
		got, denied := p.Deny(context.Background(), url)
		assert.True(t, denied, url)
		assert.Equal(t, rule, got, url)
	}
}

func TestEmptyPolicyDeniesNothing(t *testing.T) {
	var nilPolicy *Policy
	assert.True(t, nilPolicy.Empty())
	_, denied := nilPolicy.Deny(context.Background(), "http://169.254.169.254/")
	assert.False(t, denied)
	p, err := Parse(nil)
	require.NoError(t, err)
	assert.True(t, p.Empty())
	assert.Empty(t, p.Rules())
}

func TestRulesKeepTheConfiguredText(t *testing.T) {
	in := []string{"169.254.0.0/16", "*.Internal", "[::1]:6379"}
	p, err := Parse(in)
	require.NoError(t, err)
	assert.Equal(t, in, p.Rules())
}

func TestHostPortDefaults(t *testing.T) {
	for url, want := range map[string]int{"http://a/": 80, "https://a/": 443, "http://a:8080/": 8080, "wss://a/": 443} {
		_, port, err := HostPort(url)
		require.NoError(t, err, url)
		assert.Equal(t, want, port, url)
	}
	_, _, err := HostPort("gopher://a/")
	require.Error(t, err)
	_, _, err = HostPort("http:///path")
	require.Error(t, err)
}

// denier is internal/scope's Denier (the crawl's deny hook), restated so
// this package proves it offers exactly that without importing scope.
type denier interface {
	Deny(ctx context.Context, url string) (rule string, denied bool)
}

var _ denier = (*Policy)(nil)

// TestDenyIsWhatACrawlAsksOfEveryLink: a crawl asks Deny about every link
// of every page; the rule comes back as configured (for the ignore
// packet), and one host's many links cost one DNS lookup per port until
// the decision is a minute old.
func TestDenyIsWhatACrawlAsksOfEveryLink(t *testing.T) {
	p, err := Parse([]string{"169.254.0.0/16", "127.0.0.1:6379"})
	require.NoError(t, err)
	lookups := map[string]int{}
	p = p.WithLookup(func(_ context.Context, host string) ([]netip.Addr, error) {
		lookups[host]++
		if host == "metadata.example" {
			return []netip.Addr{netip.MustParseAddr("169.254.169.254")}, nil
		}
		return []netip.Addr{netip.MustParseAddr("93.184.216.34")}, nil
	})
	now := time.Date(2026, 11, 22, 12, 0, 0, 0, time.UTC)
	p.denied.now = func() time.Time { return now }
	var d denier = p
	ctx := context.Background()
	for i := range 50 {
		rule, denied := d.Deny(ctx, fmt.Sprintf("http://metadata.example/latest/%d", i))
		require.True(t, denied)
		require.Equal(t, "169.254.0.0/16", rule)
		_, denied = d.Deny(ctx, fmt.Sprintf("https://Public.Example/page/%d", i))
		require.False(t, denied)
	}
	_, _ = d.Deny(ctx, "http://public.example:8080/")
	assert.Equal(t, map[string]int{"metadata.example": 1, "public.example": 2}, lookups, "once per host and port")

	rule, denied := d.Deny(ctx, "http://169.254.169.254/latest/meta-data/")
	assert.True(t, denied)
	assert.Equal(t, "169.254.0.0/16", rule)
	rule, denied = d.Deny(ctx, "http://127.0.0.1:6379/")
	assert.True(t, denied)
	assert.Equal(t, "127.0.0.1:6379", rule)
	_, denied = d.Deny(ctx, "http://127.0.0.1:6380/")
	assert.False(t, denied, "another port of a denied host:port is allowed")

	now = now.Add(denyTTL)
	_, _ = d.Deny(ctx, "http://metadata.example/")
	assert.Equal(t, 2, lookups["metadata.example"], "an old decision is taken again")
}

func TestEmptyPolicyDeniesWithoutLookingUp(t *testing.T) {
	p, err := Parse(nil)
	require.NoError(t, err)
	p = p.WithLookup(func(context.Context, string) ([]netip.Addr, error) {
		t.Fatal("no rule, no DNS lookup")
		return nil, nil
	})
	_, denied := p.Deny(context.Background(), "http://example.com/")
	assert.False(t, denied)
}

// TestDenyForgetsALookupItsCallerCutShort: a lookup that failed because the
// caller's context ended is not remembered as "allowed".
func TestDenyForgetsALookupItsCallerCutShort(t *testing.T) {
	p, err := Parse([]string{"169.254.0.0/16"})
	require.NoError(t, err)
	p = p.WithLookup(func(ctx context.Context, _ string) ([]netip.Addr, error) {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		return []netip.Addr{netip.MustParseAddr("169.254.169.254")}, nil
	})
	cancelled, cancel := context.WithCancel(context.Background())
	cancel()
	_, denied := p.Deny(cancelled, "http://metadata.example/")
	assert.False(t, denied, "nothing to decide with")
	rule, denied := p.Deny(context.Background(), "http://metadata.example/")
	assert.True(t, denied, "the next caller gets a real decision")
	assert.Equal(t, "169.254.0.0/16", rule)
}
