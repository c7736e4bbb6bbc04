// Package netpolicy owns the fetch network policy (config fetch.deny): the
// grammar of its rules (addresses, CIDRs and host patterns, each with an
// optional port), and the decision whether a URL or a connection is denied,
// taken after DNS resolution and naming the rule that matched. It does no
// fetching: the starter asks it about submitted URLs, a crawl about
// discovered ones, and internal/egress about every connection a fetcher
// makes.
//
// Addresses are compared in canonical form: an address literal is read the
// way C resolvers and browsers read it (ParseAddr: "2130706437", "0x7f.1" and
// "0177.0.0.1" are IPv4 addresses), IPv4 is 4 bytes (an IPv4-mapped IPv6
// address is its IPv4 address), and an IPv6 address that embeds an IPv4
// address (IPv4-compatible ::a.b.c.d, NAT64 64:ff9b::/96) is denied by a rule
// for either of the two.
package netpolicy

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Rule is one parsed fetch.deny entry.
type Rule struct {
	text   string
	prefix netip.Prefix // address rules: a single address is a /32 or /128
	host   string       // host rules: lower-case name without trailing dot
	sub    bool         // host rule "*.NAME": every name below NAME, not NAME itself
	port   int          // 0: every port
}

// String is the rule as configured.
func (r Rule) String() string { return r.text }

// ParseRule parses one fetch.deny entry:
//
//	169.254.0.0/16        a CIDR (IPv4 or IPv6)
//	fd00:ec2::254         one address
//	metadata.google.internal
//	                      a host name (case-insensitive, exact)
//	*.internal            every name below internal (not internal itself)
//	127.0.0.1:6379        any of the above with a port: only that port
//	[::1]:6379            an IPv6 address or CIDR with a port, in brackets
//
// An address is read by ParseAddr, so "0x7f.0.0.1" is the address 127.0.0.1
// (not a host name) and "::ffff:127.0.0.1" is 127.0.0.1; a CIDR is written
// in standard notation. The error says what is wrong with the entry.
func ParseRule(s string) (Rule, error) {
	text := strings.TrimSpace(s)
	if text == "" {
		return Rule{}, errors.New("must not be empty")
	}
	if strings.Contains(text, "://") {
		return Rule{}, errors.New("must be a host, address or CIDR, not a URL")
	}
	r := Rule{text: text}
	hostPart, port, err := splitPort(text)
	if err != nil {
		return Rule{}, err
	}
	r.port = port
	if p, err := netip.ParsePrefix(hostPart); err == nil {
		r.prefix = p.Masked()
		if r.prefix.Addr().Is4In6() && r.prefix.Bits() >= 96 {
			r.prefix = netip.PrefixFrom(r.prefix.Addr().Unmap(), r.prefix.Bits()-96)
		}
		return r, nil
	}
	if a, err := netip.ParseAddr(hostPart); err == nil && a.Zone() != "" {
		return Rule{}, errors.New("must not have an IPv6 zone")
	}
	if a, ok := ParseAddr(hostPart); ok {
		r.prefix = netip.PrefixFrom(a, a.BitLen())
		return r, nil
	}
	if strings.Contains(hostPart, "/") {
		return Rule{}, errors.New("is not a valid CIDR (e.g. 10.0.0.0/8 or fd00::/8)")
	}
	name := strings.ToLower(strings.TrimSuffix(hostPart, "."))
	if rest, ok := strings.CutPrefix(name, "*."); ok {
		r.sub, name = true, rest
	}
	if err := checkHostName(name); err != nil {
		return Rule{}, err
	}
	r.host = name
	return r, nil
}

// ParseAddr reads host as an address literal the way resolvers (glibc's
// inet_aton and getaddrinfo) and browsers do, and returns the address in
// canonical form: IPv4 as a 4-byte address, an IPv4-mapped IPv6 address
// (::ffff:a.b.c.d) as its IPv4 address. It accepts
//
//   - IPv6 in standard notation, bare or in brackets ("[::1]"), but not with
//     a zone ("fe80::1%eth0"): that names an interface, not only an address;
//   - IPv4 as 1 to 4 dot-separated numbers, each decimal, octal (leading 0:
//     "0177") or hexadecimal ("0x7f", "0X7F"), where the last number fills
//     the remaining bytes: "2130706433", "127.1", "127.0.1", "0x7f000001",
//     "0177.0.0.01" are all 127.0.0.1; one trailing dot is allowed
//     ("127.0.0.1.", as browsers do).
//
// Anything else, including a number out of range for its bytes ("256.0.0.1",
// "0x100.0.0.1"), invalid digits ("08", "0xg", "1e3") or an empty part, is not
// an address (ok false): it is a host name.
func ParseAddr(host string) (netip.Addr, bool) {
	if inner, ok := strings.CutPrefix(host, "["); ok {
		inner, ok = strings.CutSuffix(inner, "]")
		if !ok {
			return netip.Addr{}, false
		}
		a, err := netip.ParseAddr(inner)
		if err != nil || !a.Is6() || a.Zone() != "" {
			return netip.Addr{}, false
		}
		return a.Unmap(), true
	}
	if strings.Contains(host, ":") {
		a, err := netip.ParseAddr(host)
		if err != nil || !a.Is6() || a.Zone() != "" {
			return netip.Addr{}, false
		}
		return a.Unmap(), true
	}
	return parseIPv4(host)
}

// parseIPv4 reads the IPv4 spellings of inet_aton: a, a.b, a.b.c or a.b.c.d,
// each part decimal, octal (leading 0) or hexadecimal (0x), the last part
// filling the bytes left; plus one trailing dot.
func parseIPv4(s string) (netip.Addr, bool) {
	if len(s) > 1 {
		s = strings.TrimSuffix(s, ".")
	}
	parts := strings.Split(s, ".")
	if len(parts) > 4 {
		return netip.Addr{}, false
	}
	var b [4]byte
	last := len(parts) - 1
	for i, part := range parts {
		n, ok := parseIPv4Part(part)
		if !ok {
			return netip.Addr{}, false
		}
		if i < last { // one byte
			if n > 0xff {
				return netip.Addr{}, false
			}
			b[i] = byte(n)
			continue
		}
		// The last part fills bytes i to 3.
		if n>>(8*(4-i)) != 0 {
			return netip.Addr{}, false
		}
		for j := 3; j >= i; j-- {
			b[j] = byte(n)
			n >>= 8
		}
	}
	return netip.AddrFrom4(b), true
}

// parseIPv4Part reads one number of an IPv4 spelling as C's strtoul with
// base 0 would, but only when the whole part is that number; the result is
// at most 0xffffffff.
func parseIPv4Part(s string) (uint64, bool) {
	base, digits := uint64(10), s
	switch {
	case len(s) > 1 && s[0] == '0' && (s[1] == 'x' || s[1] == 'X'):
		base, digits = 16, s[2:]
	case len(s) > 1 && s[0] == '0':
		base, digits = 8, s[1:]
	}
	if digits == "" {
		return 0, false // "" or a bare "0x"
	}
	var n uint64
	for i := 0; i < len(digits); i++ {
		c := digits[i]
		var d uint64
		switch {
		case c >= '0' && c <= '9':
			d = uint64(c - '0')
		case c >= 'a' && c <= 'f':
			d = uint64(c-'a') + 10
		case c >= 'A' && c <= 'F':
			d = uint64(c-'A') + 10
		default:
			return 0, false
		}
		if d >= base {
			return 0, false
		}
		n = n*base + d
		if n > 0xffffffff {
			return 0, false
		}
	}
	return n, true
}

// splitPort separates an optional :PORT from a rule.
func splitPort(s string) (string, int, error) {
	if strings.HasPrefix(s, "[") {
		end := strings.Index(s, "]")
		if end < 0 {
			return "", 0, errors.New("has '[' without ']' (write [IPv6]:PORT)")
		}
		host, rest := s[1:end], s[end+1:]
		if !strings.HasPrefix(rest, ":") {
			return "", 0, errors.New("must be [IPv6]:PORT (without a port, leave the brackets out)")
		}
		port, err := parsePort(rest[1:])
		return host, port, err
	}
	switch strings.Count(s, ":") {
	case 0:
		return s, 0, nil
	case 1:
		host, p, _ := strings.Cut(s, ":")
		port, err := parsePort(p)
		return host, port, err
	}
	return s, 0, nil // an IPv6 address or CIDR without a port
}

func parsePort(s string) (int, error) {
	n, err := strconv.Atoi(s)
	if err != nil || n < 1 || n > 65535 {
		return 0, fmt.Errorf("port %q: must be a number from 1 to 65535", s)
	}
	return n, nil
}

// checkHostName accepts DNS names: dot-separated labels of letters, digits,
// '-' and '_'.
func checkHostName(name string) error {
	if name == "" || name == "*" {
		return errors.New("must name a host, address or CIDR (a lone * would deny everything)")
	}
	for _, label := range strings.Split(name, ".") {
		if label == "" {
			return errors.New("is not a host name: empty label")
		}
		for _, c := range label {
			if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-' || c == '_') {
				return fmt.Errorf("is not a host name, address or CIDR: %q is not allowed (host patterns may only start with *.)", c)
			}
		}
	}
	return nil
}

func (r Rule) matchPort(port int) bool { return r.port == 0 || r.port == port }

func (r Rule) matchHost(host string, port int) bool {
	if r.host == "" || !r.matchPort(port) {
		return false
	}
	if r.sub {
		return strings.HasSuffix(host, "."+r.host)
	}
	return host == r.host
}

func (r Rule) matchAddr(a netip.Addr, port int) bool {
	return r.host == "" && r.matchPort(port) && r.prefix.Contains(a)
}

// Lookup resolves a host name to its addresses.
type Lookup func(ctx context.Context, host string) ([]netip.Addr, error)

// Policy is a parsed fetch.deny list. The zero value and nil deny nothing.
// A Policy is safe for concurrent use.
type Policy struct {
	rules  []Rule
	lookup Lookup
	// denied remembers Deny's decisions per host and port (nil: none).
	denied *decisionCache
}

// Parse parses a fetch.deny list; the error names the entry (by index) and
// what is wrong with it.
func Parse(entries []string) (*Policy, error) {
	p := &Policy{denied: newDecisionCache()}
	for i, e := range entries {
		r, err := ParseRule(e)
		if err != nil {
			return nil, fmt.Errorf("fetch.deny[%d] %q: %w", i, e, err)
		}
		p.rules = append(p.rules, r)
	}
	return p, nil
}

// WithLookup returns a copy of p that resolves names with lookup instead of
// the system resolver (tests).
func (p *Policy) WithLookup(lookup Lookup) *Policy {
	c := *p
	c.lookup = lookup
	c.denied = newDecisionCache()
	return &c
}

// Empty reports a policy that denies nothing (no proxy is needed).
func (p *Policy) Empty() bool { return p == nil || len(p.rules) == 0 }

// Rules returns the rules as configured, in order.
func (p *Policy) Rules() []string {
	if p == nil {
		return nil
	}
	out := make([]string, len(p.rules))
	for i, r := range p.rules {
		out[i] = r.text
	}
	return out
}

// Decision is the policy's answer for one host and port.
type Decision struct {
	Denied bool
	Rule   string     // the rule that matched, as configured
	Host   string     // the host asked about (lower case)
	Addr   netip.Addr // the resolved address that matched an address rule
}

// Reason describes a denial for messages: the rule, and the address when the
// host is a name that resolved to it.
func (d Decision) Reason() string {
	msg := fmt.Sprintf("denied by fetch.deny rule %q", d.Rule)
	if d.Addr.IsValid() && d.Host != d.Addr.String() {
		msg += fmt.Sprintf(" (%s resolves to %s)", d.Host, d.Addr)
	}
	return msg
}

// CheckAddr decides a connection to addr:port by the address rules, on the
// canonical form of addr: without a zone, an IPv4-mapped address as its IPv4
// address. An IPv6 address that embeds an IPv4 address (IPv4-compatible
// ::a.b.c.d other than :: and ::1, or NAT64 64:ff9b::a.b.c.d) is denied
// when a rule matches either the IPv6 or the embedded IPv4 address.
// Decision.Addr is the address that matched.
func (p *Policy) CheckAddr(addr netip.Addr, port int) Decision {
	a := addr.WithZone("").Unmap()
	d := Decision{Host: a.String()}
	if p == nil {
		return d
	}
	embedded, hasEmbedded := embeddedIPv4(a)
	for _, r := range p.rules {
		switch {
		case r.matchAddr(a, port):
			d.Denied, d.Rule, d.Addr = true, r.text, a
			return d
		case hasEmbedded && r.matchAddr(embedded, port):
			d.Denied, d.Rule, d.Addr = true, r.text, embedded
			return d
		}
	}
	return d
}

// nat64 is the NAT64 well-known prefix (RFC 6052): 64:ff9b::a.b.c.d
// reaches a.b.c.d through a NAT64 gateway.
var nat64 = netip.MustParsePrefix("64:ff9b::/96")

// embeddedIPv4 returns the IPv4 address in the last 32 bits of an
// IPv4-compatible (::a.b.c.d, not :: or ::1) or NAT64 (64:ff9b::/96) IPv6
// address a (unmapped, without zone).
func embeddedIPv4(a netip.Addr) (netip.Addr, bool) {
	if !a.Is6() {
		return netip.Addr{}, false
	}
	b := a.As16()
	v4 := netip.AddrFrom4([4]byte(b[12:]))
	compatible := [12]byte(b[:12]) == [12]byte{}
	if compatible && !a.IsUnspecified() && !a.IsLoopback() || nat64.Contains(a) {
		return v4, true
	}
	return netip.Addr{}, false
}

// Resolve decides a connection to host:port: the host rules first, then
// every address the host resolves to (CheckAddr). An address literal, in
// any spelling ParseAddr accepts (or IPv6 with a zone), resolves to itself
// in canonical form without a lookup: "2130706433" is 127.0.0.1. It returns
// the addresses to connect to when none is denied, else the denial; a host
// with any denied address is denied as a whole, so a fetcher cannot be
// steered to it by address order. An error means the host did not resolve;
// nothing is denied then (there is nothing to connect to).
func (p *Policy) Resolve(ctx context.Context, host string, port int) ([]netip.Addr, Decision, error) {
	bare := strings.Trim(host, "[]")
	name := strings.ToLower(strings.TrimSuffix(bare, "."))
	d := Decision{Host: name}
	if p != nil {
		for _, r := range p.rules {
			if r.matchHost(name, port) {
				d.Denied, d.Rule = true, r.text
				return nil, d, nil
			}
		}
	}
	var addrs []netip.Addr
	if a, ok := literal(bare); ok {
		addrs = []netip.Addr{a}
	} else {
		var err error
		if addrs, err = p.resolve(ctx, name); err != nil {
			return nil, d, fmt.Errorf("resolve %s: %w", name, err)
		}
		if len(addrs) == 0 {
			return nil, d, fmt.Errorf("resolve %s: no addresses", name)
		}
	}
	for _, a := range addrs {
		if ad := p.CheckAddr(a, port); ad.Denied {
			ad.Host = name
			return nil, ad, nil
		}
	}
	return addrs, d, nil
}

// literal reads an address literal host (without brackets) for Resolve:
// what ParseAddr accepts, and IPv6 with a zone, which is kept (in the case
// given) because a link-local address is dialled through its interface.
func literal(host string) (netip.Addr, bool) {
	if a, ok := ParseAddr(host); ok {
		return a, true
	}
	if a, err := netip.ParseAddr(host); err == nil && a.Zone() != "" {
		if a.Is4In6() {
			return a.Unmap(), true
		}
		return a, true
	}
	return netip.Addr{}, false
}

func (p *Policy) resolve(ctx context.Context, host string) ([]netip.Addr, error) {
	if p != nil && p.lookup != nil {
		return p.lookup(ctx, host)
	}
	return net.DefaultResolver.LookupNetIP(ctx, "ip", host)
}

// defaultPorts are the ports of the URL schemes fetchers use.
var defaultPorts = map[string]int{"http": 80, "https": 443, "ws": 80, "wss": 443, "ftp": 21}

// HostPort returns the host and port a URL connects to.
func HostPort(rawURL string) (string, int, error) {
	u, err := url.Parse(rawURL)
	if err != nil {
		return "", 0, fmt.Errorf("url %q: %w", rawURL, err)
	}
	host := u.Hostname()
	if host == "" {
		return "", 0, fmt.Errorf("url %q: has no host", rawURL)
	}
	if p := u.Port(); p != "" {
		port, err := parsePort(p)
		if err != nil {
			return "", 0, fmt.Errorf("url %q: %w", rawURL, err)
		}
		return host, port, nil
	}
	port, ok := defaultPorts[strings.ToLower(u.Scheme)]
	if !ok {
		return "", 0, fmt.Errorf("url %q: scheme %q has no known default port", rawURL, u.Scheme)
	}
	return host, port, nil
}

// CheckURL decides a URL after DNS resolution. A resolution error is
// returned with an undenied decision: the caller decides whether an
// unresolvable host is acceptable (a fetch through internal/egress checks it
// again when it connects).
func (p *Policy) CheckURL(ctx context.Context, rawURL string) (Decision, error) {
	host, port, err := HostPort(rawURL)
	if err != nil {
		return Decision{}, err
	}
	_, d, err := p.Resolve(ctx, host, port)
	return d, err
}

// Deny reports whether rawURL is denied and by which rule (as configured):
// what a crawl asks of every URL it discovers before queueing it
// (internal/scope's Denier). A page links to few hosts many times, so a
// decision is remembered per host and port for denyTTL, and a lookup
// waits at most denyLookupTimeout. A URL that cannot be parsed or
// resolved is not denied here: it cannot be fetched, and every connection
// is checked again when it is made (internal/egress).
func (p *Policy) Deny(ctx context.Context, rawURL string) (rule string, denied bool) {
	if p.Empty() {
		return "", false
	}
	host, port, err := HostPort(rawURL)
	if err != nil {
		return "", false
	}
	key := strings.ToLower(host) + " " + strconv.Itoa(port)
	if d, ok := p.denied.get(key); ok {
		return d.Rule, d.Denied
	}
	lctx, cancel := context.WithTimeout(ctx, denyLookupTimeout)
	defer cancel()
	_, d, err := p.Resolve(lctx, host, port)
	if err == nil || ctx.Err() == nil {
		p.denied.put(key, d) // not a lookup the caller cut short
	}
	return d.Rule, d.Denied
}

// Deny's memory: decisions are kept denyTTL (DNS answers change, the
// policy does not), at most denyCacheSize of them.
const (
	denyTTL           = time.Minute
	denyCacheSize     = 4096
	denyLookupTimeout = 5 * time.Second
)

// decisionCache holds Deny's recent decisions by "host port".
type decisionCache struct {
	now func() time.Time
	mu  sync.Mutex
	m   map[string]cachedDecision
}

type cachedDecision struct {
	d     Decision
	until time.Time
}

func newDecisionCache() *decisionCache {
	return &decisionCache{now: time.Now, m: map[string]cachedDecision{}}
}

func (c *decisionCache) get(key string) (Decision, bool) {
	if c == nil {
		return Decision{}, false
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.m[key]
	if !ok || !c.now().Before(e.until) {
		return Decision{}, false
	}
	return e.d, true
}

func (c *decisionCache) put(key string, d Decision) {
	if c == nil {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.m) >= denyCacheSize {
		clear(c.m) // simplest bound: a crawl refills what it still needs
	}
	c.m[key] = cachedDecision{d: d, until: c.now().Add(denyTTL)}
}
