package main

import (
	"context"
	"fmt"
	"io"
	"net/netip"
	"strings"
	"testing"

	"github.com/spf13/pflag"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/archiveflow/archiveflow/config"
)

// parseSubmitArgs parses a `starter submit` command line as exec does and
// validates it with parseSubmission, touching no backend.
func parseSubmitArgs(args []string) (*submission, error) {
	a := newApp(strings.NewReader(""), io.Discard, io.Discard)
	// Every host is a public address: no DNS traffic per case.
	a.resolve = func(context.Context, string) ([]netip.Addr, error) {
		return []netip.Addr{netip.MustParseAddr("192.0.2.1")}, nil
	}
	c := submitCommand()
	fs := pflag.NewFlagSet(c.name, pflag.ContinueOnError)
	fs.SetOutput(io.Discard)
	c.flags(fs)
	fs.Bool("json", false, "")
	config.BindFlags(fs)
	fs.BoolP("help", "h", false, "")
	if err := fs.Parse(args); err != nil {
		return nil, usageErr("%v (see: starter help %s)", err, c.name)
	}
	cfg, err := config.Load(config.Options{Flags: fs})
	if err != nil {
		return nil, err
	}
	return parseSubmission(a, &invocation{cmd: c, fs: fs, args: fs.Args(), cfg: cfg})
}

// malformedSubmit is one bad submit command line and the words its error
// must contain: the argument or flag at fault.
type malformedSubmit struct {
	args  []string
	names []string
}

var badSubmitURLs = []string{
	"", " ", "http://", "https://", "example.com", "/path", "ftp://example.com/", "file:///etc/passwd",
	"javascript:alert(1)", "mailto:a@b.c", "http://exa mple.com/", "http://example.com:99999/",
	"http://[::1/", "http://example.com/\x00", "http://example.com/\n", "data:text/plain,x", "http:example.com",
}

var badSubmitFlags = map[string][]string{
	"--concurrency": {"-1", "-100", "x", "1.5", ""},
	"--nice":        {"20", "-21", "100", "x", ""},
	"--depth":       {"deep", "", "Shallow", "-1", "1.5", "infinite", "1000001"},
	"--delay":       {"-5s", "0s", "soon", "5", "1 hour"},
	"--at":          {"tomorrow", "2000-01-01T00:00:00Z", "", "2030-13-01T00:00:00Z", "12:00"},
	"--ignore":      {"a(b", "(?<=x)y", "[z-a]", "*", "(?P<n>", "a{2,1}"},
	"--user-agent":  {"a\nb", "a\x00b", "\r", "x\x7f"},
	"--queue":       {"nope", "ARCHIVEFLOW", " "},
	"--robots":      {"respect", "", "OBEY"},
}

// malformedSubmits is a corpus of bad submit command lines: every bad URL
// as first and as second argument, every bad value of every flag, unknown
// flags and flags without a value.
func malformedSubmits() []malformedSubmit {
	const good = "https://example.com/"
	var out []malformedSubmit
	for _, u := range badSubmitURLs {
		out = append(out,
			malformedSubmit{[]string{u}, []string{"argument 1"}},
			malformedSubmit{[]string{good, u}, []string{"argument 2"}})
	}
	for flag, vals := range badSubmitFlags {
		for _, v := range vals {
			out = append(out,
				malformedSubmit{[]string{good, flag, v}, []string{flag}},
				malformedSubmit{[]string{good, flag + "=" + v}, []string{flag}})
		}
		if flag != "--ignore" {
			out = append(out, malformedSubmit{[]string{good, flag}, []string{flag}})
		}
	}
	for _, f := range []string{"--bogus", "--conc", "-x", "---nice=1", "--wait=maybe", "--force=2"} {
		out = append(out, malformedSubmit{[]string{good, f}, []string{strings.TrimLeft(strings.SplitN(f, "=", 2)[0], "-")}})
	}
	out = append(out,
		malformedSubmit{nil, []string{"no URL given"}},
		malformedSubmit{[]string{good, "HTTPS://EXAMPLE.COM:443/"}, []string{"argument 2", "same job"}},
		malformedSubmit{[]string{good, "--delay", "1h", "--at", "2099-01-01T00:00:00Z"}, []string{"--delay", "--at"}},
		malformedSubmit{[]string{"-i", "/nonexistent/urls.txt"}, []string{"/nonexistent/urls.txt"}},
	)
	return out
}

func TestMalformedSubmitCommandLinesGetClearErrors(t *testing.T) {
	corpus := malformedSubmits()
	require.GreaterOrEqual(t, len(corpus), 120)
	for _, c := range corpus {
		s, err := parseSubmitArgs(c.args)
		if !assert.Error(t, err, "submit %q accepted: %+v", c.args, s) {
			continue
		}
		for _, n := range c.names {
			assert.Contains(t, err.Error(), n, "the error for submit %q names %s", c.args, n)
		}
	}
	t.Logf("%d malformed submit command lines", len(corpus))
}

// FuzzSubmitArgs validates arbitrary submit command lines of up to four
// words: parsing never panics, a refusal says why, and an accepted line
// is fully valid.
func FuzzSubmitArgs(f *testing.F) {
	f.Add("https://example.com/", "--nice", "5", "--wait")
	f.Add("http://a/", "http://b/", "--ignore", `\.pdf$`)
	f.Add("https://example.com/", "--depth", "inf", "--concurrency=0")
	f.Add("https://example.com/", "--delay", "2h", "--queue=archiveflow")
	f.Add("ftp://x/", "--at", "2030-01-01T00:00:00Z", "--user-agent=a")
	f.Add("-i", "-", "--force", "")
	for _, c := range malformedSubmits() {
		if len(c.args) <= 4 {
			a := append(append([]string(nil), c.args...), "", "", "", "")
			f.Add(a[0], a[1], a[2], a[3])
		}
	}
	f.Fuzz(func(t *testing.T, a1, a2, a3, a4 string) {
		var args []string
		for _, a := range []string{a1, a2, a3, a4} {
			if strings.HasPrefix(a, "/dev/") || strings.HasPrefix(a, "/proc/") {
				t.Skip("reading device files is not the parser's concern")
			}
			if a != "" {
				args = append(args, a)
			}
		}
		s, err := parseSubmitArgs(args)
		if err != nil {
			if strings.TrimSpace(err.Error()) == "" {
				t.Fatalf("submit %q: empty error", args)
			}
			return
		}
		if len(s.targets) == 0 {
			t.Fatalf("submit %q: accepted with no targets", args)
		}
		for _, tg := range s.targets {
			if !strings.HasPrefix(tg.URL, "http://") && !strings.HasPrefix(tg.URL, "https://") || tg.Ident == "" {
				t.Fatalf("submit %q: accepted target %+v", args, tg)
			}
		}
		if s.settings.Concurrency < 0 || s.nice < -20 || s.nice > 19 || (s.depth != "shallow" && s.depth != "inf") {
			t.Fatalf("submit %q: accepted invalid settings %s", args, fmt.Sprintf("%+v depth %q nice %d", s.settings, s.depth, s.nice))
		}
		if err := s.settings.Validate(); err != nil {
			t.Fatalf("submit %q: accepted invalid settings: %v", args, err)
		}
	})
}
