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

func TestParseAddrReadsLiteralsAsResolversDo(t *testing.T) {
	cases := []struct{ in, want string }{
		{"127.0.0.5", "127.0.0.5"},
		{"127.0.0.5.", "127.0.0.5"},
		{"2130706437", "127.0.0.5"},
		{"2130706437.", "127.0.0.5"},
		{"127.5", "127.0.0.5"},
		{"127.0.5", "127.0.0.5"},
		{"0x7f.0.0.5", "127.0.0.5"},
		{"0X7F.0.0.0x5", "127.0.0.5"},
		{"0177.0.0.05", "127.0.0.5"},
		{"0x7f000005", "127.0.0.5"},
		{"0x7F000005", "127.0.0.5"},
		{"017700000005", "127.0.0.5"},
		{"0x7f.5", "127.0.0.5"},
		{"0177.0x5", "127.0.0.5"},
		{"0x00000000007f.0.0.5", "127.0.0.5"},
		{"255.255.255.255", "255.255.255.255"},
		{"4294967295", "255.255.255.255"},
		{"1.16777215", "1.255.255.255"},
		{"1.2.65535", "1.2.255.255"},
		{"0", "0.0.0.0"},
		{"2852039166", "169.254.169.254"},
		{"0xa9fea9fe", "169.254.169.254"},
		{"0251.0376.0251.0376", "169.254.169.254"},
		{"::1", "::1"},
		{"[::1]", "::1"},
		{"[::ffff:127.0.0.5]", "127.0.0.5"},
		{"::ffff:7f00:5", "127.0.0.5"},
		{"::7f00:5", "::7f00:5"},
		{"64:ff9b::7f00:5", "64:ff9b::7f00:5"},
		{"FD00:EC2::254", "fd00:ec2::254"},
	}
	for _, tc := range cases {
		t.Run(tc.in, func(t *testing.T) {
			a, ok := ParseAddr(tc.in)
			require.True(t, ok)
			assert.Equal(t, netip.MustParseAddr(tc.want), a)
			assert.Equal(t, tc.want, a.String())
		})
	}
}

func TestParseAddrLeavesHostNamesAlone(t *testing.T) {
	for _, in := range []string{
		"", ".", "..", "example.com", "localhost", "1e3", "0x", "0x.0.0.1",
		"08.0.0.1", "09", "0xg", "0xg.0.0.1", "1.2.3.4.5", "256.0.0.1",
		"0x100.0.0.1", "0400.0.0.1", "1.2.3.256", "1.2.65536", "1.16777216",
		"4294967296", "0x100000000", "99999999999999999999999", "1..2.3",
		"1.2.3.4..", ".1.2.3.4", "-1.0.0.1", "+1.0.0.1", " 1.2.3.4", "1.2.3.4 ",
		"[127.0.0.1]", "[::1", "::1]", "fe80::1%eth0", "[fe80::1%eth0]", "::1.",
		"127.0.0.1:80", "1.2.3.4/32",
	} {
		a, ok := ParseAddr(in)
		assert.False(t, ok, "%q parsed as %s", in, a)
	}
}

// spellings127005 are spellings of 127.0.0.5 that some resolver or browser
// connects to 127.0.0.5 (as URL hosts: IPv6 in brackets).
var spellings127005 = []string{
	"127.0.0.5", "127.0.0.5.", "2130706437", "127.5", "127.0.5", "0x7f.0.0.5",
	"0177.0.0.05", "0x7f000005", "0X7F000005", "0x7f.5",
	"[::ffff:127.0.0.5]", "[::ffff:7f00:5]", "[::7f00:5]", "[::127.0.0.5]",
	"[64:ff9b::7f00:5]", "[64:ff9b::127.0.0.5]",
}

func TestEverySpellingOfADeniedAddressIsDenied(t *testing.T) {
	for _, rule := range []string{"127.0.0.5/32", "127.0.0.5", "0x7f.0.0.5", "2130706437", "::ffff:127.0.0.5", "127.0.0.0/8"} {
		p, err := Parse([]string{rule})
		require.NoError(t, err)
		p = p.WithLookup(func(context.Context, string) ([]netip.Addr, error) {
			t.Fatal("an address literal needs no DNS lookup")
			return nil, nil
		})
		for _, host := range spellings127005 {
			t.Run(rule+" "+host, func(t *testing.T) {
				url := "http://" + host + ":80/"
				d, err := p.CheckURL(context.Background(), url)
				require.NoError(t, err)
				assert.True(t, d.Denied)
				assert.Equal(t, rule, d.Rule)
				assert.Equal(t, netip.MustParseAddr("127.0.0.5"), d.Addr)
				got, denied := p.Deny(context.Background(), url)
				assert.True(t, denied)
				assert.Equal(t, rule, got)
			})
		}
	}
}

func TestMetadataAddressSpellingsAreDenied(t *testing.T) {
	p := policy(t, "169.254.0.0/16")
	for _, host := range []string{
		"169.254.169.254", "2852039166", "0xa9fea9fe", "0xA9FEA9FE", "0xa9.0xfe.0xa9.0xfe",
		"0251.0376.0251.0376", "025177524776", "169.254.43518", "169.16689662",
		"[::ffff:a9fe:a9fe]", "[::a9fe:a9fe]", "[64:ff9b::a9fe:a9fe]",
	} {
		t.Run(host, func(t *testing.T) {
			d, err := p.CheckURL(context.Background(), "http://"+host+"/latest/meta-data/")
			require.NoError(t, err)
			assert.True(t, d.Denied)
			assert.Equal(t, "169.254.0.0/16", d.Rule)
			assert.Equal(t, netip.MustParseAddr("169.254.169.254"), d.Addr)
		})
	}
}

func TestParseRuleReadsAddressSpellings(t *testing.T) {
	cases := []struct{ rule, prefix string }{
		{"0x7f.0.0.5", "127.0.0.5/32"},
		{"2130706437", "127.0.0.5/32"},
		{"0177.0.0.05:6379", "127.0.0.5/32"},
		{"127.5", "127.0.0.5/32"},
		{"::ffff:7f00:5", "127.0.0.5/32"},
		{"[::ffff:127.0.0.5]:80", "127.0.0.5/32"},
		{"::7f00:5", "::7f00:5/128"},
		{"10.0.0.0/8", "10.0.0.0/8"},
		{"::ffff:10.0.0.0/104", "10.0.0.0/8"},
	}
	for _, tc := range cases {
		r, err := ParseRule(tc.rule)
		require.NoError(t, err, tc.rule)
		assert.Equal(t, netip.MustParsePrefix(tc.prefix), r.prefix, tc.rule)
		assert.Empty(t, r.host, tc.rule)
		assert.Equal(t, tc.rule, r.String())
	}
	for _, rule := range []string{"08.0.0.1", "1.2.3.4.5", "256.0.0.1", "1e3"} {
		r, err := ParseRule(rule)
		require.NoError(t, err, rule)
		assert.Equal(t, rule, r.host, "%q is a host name", rule)
	}
	_, err := ParseRule("0x7f.0.0.0/8")
	require.Error(t, err, "a CIDR is written in standard notation")
	assert.Contains(t, err.Error(), "not a valid CIDR")
}

func TestCheckAddrMatchesEmbeddedIPv4(t *testing.T) {
	p, err := Parse([]string{"127.0.0.0/8", "[64:ff9b::/96]:443", "::/128", "0.0.0.0/8"})
	require.NoError(t, err)
	cases := []struct {
		addr, rule, matched string
	}{
		{"::ffff:127.0.0.5", "127.0.0.0/8", "127.0.0.5"},
		{"::7f00:5", "127.0.0.0/8", "127.0.0.5"},
		{"64:ff9b::7f00:5", "127.0.0.0/8", "127.0.0.5"},
		{"64:ff9b::5db8:d822", "", ""}, // 93.184.216.34 on port 80
		{"::5db8:d822", "", ""},
		{"::", "::/128", "::"}, // the unspecified address, not 0.0.0.0
		{"::1", "", ""},        // loopback, not 0.0.0.1
		{"::2", "0.0.0.0/8", "0.0.0.2"},
		{"64:ff9b:1::7f00:5", "", ""}, // outside the well-known /96
		{"2001:db8::7f00:5", "", ""},
	}
	for _, tc := range cases {
		d := p.CheckAddr(netip.MustParseAddr(tc.addr), 80)
		assert.Equal(t, tc.rule != "", d.Denied, tc.addr)
		assert.Equal(t, tc.rule, d.Rule, tc.addr)
		if tc.matched != "" {
			assert.Equal(t, netip.MustParseAddr(tc.matched), d.Addr, tc.addr)
		}
	}
	d := p.CheckAddr(netip.MustParseAddr("64:ff9b::5db8:d822"), 443)
	assert.True(t, d.Denied, "a rule for the IPv6 address matches as given")
	assert.Equal(t, "[64:ff9b::/96]:443", d.Rule)
	assert.Equal(t, netip.MustParseAddr("64:ff9b::5db8:d822"), d.Addr)
}

func TestResolveReturnsTheCanonicalAddress(t *testing.T) {
	p, err := Parse([]string{"127.0.0.0/8", "169.254.0.0/16"})
	require.NoError(t, err)
	p = p.WithLookup(func(context.Context, string) ([]netip.Addr, error) {
		t.Fatal("an address literal needs no DNS lookup")
		return nil, nil
	})
	cases := map[string]string{
		"1572395042":           "93.184.216.34",
		"0x5db8d822":           "93.184.216.34",
		"0135.0270.0330.042":   "93.184.216.34",
		"93.184.55330":         "93.184.216.34",
		"93.184.216.34.":       "93.184.216.34",
		"[::ffff:5db8:d822]":   "93.184.216.34",
		"::ffff:93.184.216.34": "93.184.216.34",
		"[2001:db8::1]":        "2001:db8::1",
		"fe80::1%eth0":         "fe80::1%eth0",
		"fe80::1%ETH0":         "fe80::1%ETH0",
	}
	for host, want := range cases {
		addrs, d, err := p.Resolve(context.Background(), host, 80)
		require.NoError(t, err, host)
		assert.False(t, d.Denied, host)
		assert.Equal(t, []netip.Addr{netip.MustParseAddr(want)}, addrs, host)
	}
	addrs, d, err := p.Resolve(context.Background(), "2130706437", 80)
	require.NoError(t, err)
	assert.Nil(t, addrs)
	assert.True(t, d.Denied)
	assert.Equal(t, "127.0.0.0/8", d.Rule)
	assert.Equal(t, "2130706437", d.Host)
	assert.Equal(t, `denied by fetch.deny rule "127.0.0.0/8" (2130706437 resolves to 127.0.0.5)`, d.Reason())
}

func TestResolvedNameWithAnyDeniedAddressIsDenied(t *testing.T) {
	p, err := Parse([]string{"127.0.0.0/8", "169.254.0.0/16"})
	require.NoError(t, err)
	p = p.WithLookup(func(_ context.Context, host string) ([]netip.Addr, error) {
		switch host {
		case "rebind.example":
			return []netip.Addr{netip.MustParseAddr("93.184.216.34"), netip.MustParseAddr("::ffff:127.0.0.5")}, nil
		case "nat64.example":
			return []netip.Addr{netip.MustParseAddr("2001:db8::1"), netip.MustParseAddr("64:ff9b::a9fe:a9fe")}, nil
		case "public.example":
			return []netip.Addr{netip.MustParseAddr("93.184.216.34"), netip.MustParseAddr("2001:db8::1")}, nil
		}
		return nil, errors.New("no such host")
	})
	cases := []struct{ host, rule, addr string }{
		{"rebind.example", "127.0.0.0/8", "127.0.0.5"},
		{"nat64.example", "169.254.0.0/16", "169.254.169.254"},
	}
	for _, tc := range cases {
		addrs, d, err := p.Resolve(context.Background(), tc.host, 443)
		require.NoError(t, err, tc.host)
		assert.Nil(t, addrs, tc.host)
		assert.True(t, d.Denied, tc.host)
		assert.Equal(t, tc.rule, d.Rule, tc.host)
		assert.Equal(t, tc.host, d.Host, tc.host)
		assert.Equal(t, netip.MustParseAddr(tc.addr), d.Addr, tc.host)
	}
	addrs, d, err := p.Resolve(context.Background(), "public.example", 443)
	require.NoError(t, err)
	assert.False(t, d.Denied)
	assert.Len(t, addrs, 2)
}
