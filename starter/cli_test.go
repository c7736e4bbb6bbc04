package main

import (
	"bytes"
	"context"
	"encoding/json"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/zap"

	"github.com/archiveflow/archiveflow/config"
	"github.com/archiveflow/archiveflow/internal/backend"
	"github.com/archiveflow/archiveflow/internal/model"
	"github.com/archiveflow/archiveflow/internal/rkeys"
	"github.com/archiveflow/archiveflow/internal/testredis"
)

// cliResult is one CLI run.
type cliResult struct {
	code           int
	stdout, stderr string
}

// runCLI runs the starter in-process with args.
func runCLI(t *testing.T, stdin string, args ...string) cliResult {
	t.Helper()
	var out, errb bytes.Buffer
	a := newApp(strings.NewReader(stdin), &out, &errb)
	a.pollInterval = 50 * time.Millisecond
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	code := a.run(ctx, args)
	return cliResult{code: code, stdout: out.String(), stderr: errb.String()}
}

// closedAddr returns a loopback address nothing listens on.
func closedAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := l.Addr().String()
	require.NoError(t, l.Close())
	return addr
}

// requireEmpty asserts that nothing was written to Redis.
func requireEmpty(t *testing.T, srv *testredis.Server) {
	t.Helper()
	n, err := srv.Client().DBSize(context.Background()).Result()
	require.NoError(t, err)
	assert.Zero(t, n, "Redis must stay empty after rejected input")
}

func writeFile(t *testing.T, name, content string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	require.NoError(t, os.WriteFile(p, []byte(content), 0o644))
	return p
}

func TestSubmitRejectsBadInputBeforeAnythingIsStarted(t *testing.T) {
	srv := testredis.Start(t)
	backend := []string{"--redis-url", srv.URL, "--temporal-address", closedAddr(t)}
	urls := writeFile(t, "urls.txt", "# seeds\nhttps://example.com/\n\nftp://example.org/\nhttps://example.net/\n")
	unreadable := filepath.Join(t.TempDir(), "missing.txt")
	rules := writeFile(t, "rules.json", `[{"pattern": "/calendar/", "skip": true}]`)
	badRules := writeFile(t, "bad.json", `[{"pattern": "/calendar/", "skip": true}, {"pattern": "a(", "skip": true}]`)
	past := time.Now().Add(-time.Hour).UTC().Format(time.RFC3339)
	future := time.Now().Add(time.Hour).UTC().Format(time.RFC3339)

	cases := []struct {
		name string
		args []string
		want []string
	}{
		{"malformed URL", []string{"http://"}, []string{"argument 1", `url "http://"`}},
		{"relative URL", []string{"example.com/page"}, []string{"argument 1", "must be absolute"}},
		{"non-http scheme", []string{"ftp://example.com/"}, []string{"argument 1", `scheme "ftp"`, "must be http or https"}},
		{"one bad URL among good ones", []string{"https://example.com/", "mailto:a@b.c"}, []string{"argument 2", "mailto:a@b.c"}},
		{"no URL", nil, []string{"no URL given"}},
		{"same job twice", []string{"https://example.com/", "HTTPS://EXAMPLE.com:443"}, []string{"argument 2", "same job as argument 1"}},
		{"unknown queue", []string{"https://example.com/", "--queue", "nope"}, []string{`--queue "nope"`, "configured pool", "archiveflow (pool default)"}},
		{"invalid regex", []string{"https://example.com/", "--ignore", "a(b"}, []string{"--ignore", `ignore pattern "a(b"`}},
		{"python-only regex", []string{"https://example.com/", "--ignore", `(?<=foo)bar`}, []string{`ignore pattern "(?<=foo)bar"`, "lookbehind"}},
		{"negative concurrency", []string{"https://example.com/", "--concurrency", "-1"}, []string{"--concurrency -1: must be 0..1000 (0 pauses the job)"}},
		{"over-long URL", []string{"https://example.com/" + strings.Repeat("a", 10000)}, []string{"argument 1", "10020 bytes: a job's URL must be at most 2048 bytes", "ArchiveflowURL"}},
		{"too much concurrency", []string{"https://example.com/", "--concurrency", "1001"}, []string{"--concurrency 1001: must be 0..1000"}},
		{"absurd concurrency", []string{"https://example.com/", "--depth", "inf", "--concurrency", "999999"}, []string{"--concurrency 999999: must be 0..1000"}},
		{"past --at", []string{"https://example.com/", "--at", past}, []string{"--at " + past, "in the past"}},
		{"unparsable --at", []string{"https://example.com/", "--at", "tomorrow"}, []string{`--at "tomorrow"`, "RFC 3339"}},
		{"--delay with --at", []string{"https://example.com/", "--delay", "1h", "--at", future}, []string{"--delay and --at"}},
		{"non-positive --delay", []string{"https://example.com/", "--delay", "-5s"}, []string{"--delay -5s: must be > 0"}},
		{"nice out of range", []string{"https://example.com/", "--nice", "20"}, []string{"--nice 20: must be between -20 and 19"}},
		{"bad depth", []string{"https://example.com/", "--depth", "deep"}, []string{`--depth "deep": must be shallow (one URL), inf (crawl the site) or a number of links`}},
		{"negative depth", []string{"https://example.com/", "--depth", "-2"}, []string{`--depth "-2": must be shallow (one URL), inf (crawl the site) or a number of links 0..1000000`}},
		{"rules without a crawl", []string{"https://example.com/", "--rules", rules}, []string{"--rules: rules are for crawls"}},
		{"bad robots policy", []string{"https://example.com/", "--depth", "inf", "--robots", "respect"}, []string{`--robots "respect": must be obey or ignore`}},
		{"robots without a crawl", []string{"https://example.com/", "--robots", "obey"}, []string{"--robots: robots.txt is for crawls"}},
		{"sitemaps without a crawl", []string{"https://example.com/", "--sitemaps"}, []string{"--sitemaps: sitemaps are for crawls"}},
		{"invalid rule", []string{"https://example.com/", "--depth", "inf", "--rules", badRules}, []string{"--rules " + badRules, `rule 2 (pattern "a(")`, "not a valid Go RE2"}},
		{"unreadable rules", []string{"https://example.com/", "--depth", "2", "--rules", unreadable}, []string{"--rules " + unreadable, "cannot read the rules file"}},
		{"control character in user agent", []string{"https://example.com/", "--user-agent", "a\nb"}, []string{"--user-agent", "control characters"}},
		{"unreadable -i file", []string{"-i", unreadable}, []string{"-i " + unreadable, "cannot read the URL file"}},
		{"bad line in -i file", []string{"-i", urls}, []string{urls + " line 4", "ftp://example.org/"}},
		{"unknown flag", []string{"https://example.com/", "--bogus"}, []string{"unknown flag: --bogus"}},
		{"every problem at once", []string{"ftp://x/", "--queue", "nope", "--concurrency", "-2"}, []string{"argument 1", `--queue "nope"`, "--concurrency -2"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			res := runCLI(t, "", append(append([]string{"submit"}, tc.args...), backend...)...)
			assert.Equal(t, exitUsage, res.code, "stderr: %s", res.stderr)
			for _, w := range tc.want {
				assert.Contains(t, res.stderr, w)
			}
			assert.Empty(t, res.stdout)
			requireEmpty(t, srv)
		})
	}
}

// TestBadDepthIsOneMessage: a bad --depth gets one message naming the
// flag and its rule, not a second, contradictory one.
func TestBadDepthIsOneMessage(t *testing.T) {
	srv := testredis.Start(t)
	res := runCLI(t, "", "submit", "https://example.com/", "--depth", "-1", "--redis-url", srv.URL, "--temporal-address", closedAddr(t))
	assert.Equal(t, exitUsage, res.code)
	assert.Equal(t, 1, strings.Count(res.stderr, "--depth"), res.stderr)
	assert.NotContains(t, res.stderr, "fetch_depth")
	requireEmpty(t, srv)
}

func TestSubmitReadsURLsFromStdin(t *testing.T) {
	srv := testredis.Start(t)
	res := runCLI(t, "https://example.com/\n# c\n\nnot a url\n", "submit", "-i", "-", "--redis-url", srv.URL, "--temporal-address", closedAddr(t))
	assert.Equal(t, exitUsage, res.code)
	assert.Contains(t, res.stderr, "- line 4")
	requireEmpty(t, srv)
}

func TestSubmitWithUnreachableBackendsExitsFiveAndWritesNothing(t *testing.T) {
	t.Run("redis", func(t *testing.T) {
		res := runCLI(t, "", "submit", "https://example.com/", "--redis-url", "redis://"+closedAddr(t)+"/0", "--temporal-address", closedAddr(t))
		assert.Equal(t, exitUnavailable, res.code, "stderr: %s", res.stderr)
		assert.Contains(t, res.stderr, "connect to Redis")
	})
	t.Run("temporal", func(t *testing.T) {
		srv := testredis.Start(t)
		res := runCLI(t, "", "submit", "https://example.com/", "--redis-url", srv.URL, "--temporal-address", closedAddr(t))
		assert.Equal(t, exitUnavailable, res.code, "stderr: %s", res.stderr)
		assert.Contains(t, res.stderr, "Temporal")
		requireEmpty(t, srv)
	})
}

func TestOtherCommandsRejectBadInput(t *testing.T) {
	srv := testredis.Start(t)
	backend := []string{"--redis-url", srv.URL, "--temporal-address", closedAddr(t)}
	const id = "3mlbkdu1fpo7wt4lr2qf1mpsw"
	cases := []struct {
		name string
		args []string
		want string
	}{
		{"status without ident", []string{"status"}, "want exactly one IDENT"},
		{"status with two idents", []string{"status", id, id}, "got 2 argument(s)"},
		{"status with a bad ident", []string{"status", "Not-An-Ident"}, `ident "Not-An-Ident": must be 1-25 characters of 0-9 and a-z`},
		{"status with a bad URL", []string{"status", "ftp://example.com/"}, "must be http or https"},
		{"list with unknown state", []string{"list", "--state", "sleeping"}, `job state "sleeping": must be one of pending`},
		{"list with arguments", []string{"list", "active"}, "takes no arguments"},
		{"abort without ident", []string{"abort"}, "want exactly one IDENT"},
		{"set without pairs", []string{"set", id}, "nothing to set"},
		{"set with negative concurrency", []string{"set", id, "concurrency=-1"}, "concurrency=-1: must be an integer 0..1000"},
		{"set with too much concurrency", []string{"set", id, "concurrency=999999"}, "concurrency=999999: must be an integer 0..1000 (0 pauses the job)"},
		{"set with unknown key", []string{"set", id, "speed=9"}, `unknown key "speed"`},
		{"set without =", []string{"set", id, "concurrency"}, `"concurrency": must be key=value`},
		{"set with bad delay", []string{"set", id, "delay_min=soon"}, "delay_min=soon: must be milliseconds"},
		{"set with delay_max < delay_min", []string{"set", id, "delay_min=500", "delay_max=1"}, "delay_max=1 ms: must be >= delay_min (500 ms)"},
		{"ignore with unknown op", []string{"ignore", "put", id, "x"}, `"put": must be add or rm`},
		{"ignore with missing pattern", []string{"ignore", "add", id}, "want add|rm IDENT PATTERN"},
		{"ignore with python-only pattern", []string{"ignore", "add", id, `(foo)\1`}, "backreference"},
		{"ignore with invalid pattern", []string{"ignore", "add", id, "[a-"}, `ignore pattern "[a-"`},
		{"logs with negative --after", []string{"logs", id, "--after", "-1"}, "--after -1: must be >= 0"},
		{"pipelines with arguments", []string{"pipelines", "x"}, "takes no arguments"},
		{"bad config value", []string{"status", id, "--log-level", "loud"}, "loud"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			res := runCLI(t, "", append(tc.args, backend...)...)
			assert.Equal(t, exitUsage, res.code, "stderr: %s", res.stderr)
			assert.Contains(t, res.stderr, tc.want)
			requireEmpty(t, srv)
		})
	}
}

func TestReadCommandsOnAMissingJobExitThree(t *testing.T) {
	srv := testredis.Start(t)
	for _, cmd := range [][]string{{"status"}, {"logs"}, {"logs", "-f"}} {
		t.Run(strings.Join(cmd, " "), func(t *testing.T) {
			args := append(cmd, "3mlbkdu1fpo7wt4lr2qf1mpsw", "--redis-url", srv.URL)
			res := runCLI(t, "", args...)
			assert.Equal(t, exitNotFound, res.code, "stderr: %s", res.stderr)
			assert.Contains(t, res.stderr, "job 3mlbkdu1fpo7wt4lr2qf1mpsw: not found")
		})
	}
}

func TestReadCommandsOnAnEmptyRedis(t *testing.T) {
	srv := testredis.Start(t)
	res := runCLI(t, "", "list", "--redis-url", srv.URL)
	require.Equal(t, exitOK, res.code, res.stderr)
	assert.Equal(t, "no jobs\n", res.stdout)

	res = runCLI(t, "", "list", "--json", "--redis-url", srv.URL)
	require.Equal(t, exitOK, res.code, res.stderr)
	assert.JSONEq(t, `{"jobs":[]}`, res.stdout)

	res = runCLI(t, "", "pipelines", "--json", "--redis-url", srv.URL)
	require.Equal(t, exitOK, res.code, res.stderr)
	assert.JSONEq(t, `{"pipelines":[]}`, res.stdout)
}

func TestHelpAndUsage(t *testing.T) {
	res := runCLI(t, "")
	assert.Equal(t, exitUsage, res.code)
	assert.Contains(t, res.stderr, "Commands:")

	res = runCLI(t, "", "help")
	assert.Equal(t, exitOK, res.code)
	for _, c := range []string{"submit", "status", "list", "abort", "set", "ignore", "logs", "pipelines", "dev", "Exit codes:"} {
		assert.Contains(t, res.stdout, c)
	}
	// Every command's summary starts in one column, however long its name.
	column := -1
	for _, c := range newApp(nil, nil, nil).commands {
		var line string
		for _, l := range strings.Split(res.stdout, "\n") {
			if strings.HasPrefix(l, "  "+c.name+" ") {
				line = l
			}
		}
		at := strings.Index(line, c.summary)
		require.Positive(t, at, "the usage lists %s with its summary", c.name)
		assert.Greater(t, at, len("  "+c.name), "a space between %s and its summary", c.name)
		if column < 0 {
			column = at
		}
		assert.Equal(t, column, at, "%s's summary starts in the column of the others", c.name)
	}

	for _, c := range newApp(nil, nil, nil).commands {
		t.Run(c.name, func(t *testing.T) {
			res := runCLI(t, "", c.name, "--help")
			assert.Equal(t, exitOK, res.code, res.stderr)
			assert.Contains(t, res.stdout, "starter "+c.name+" — ")
			if c.name != "dev" {
				assert.Contains(t, res.stdout, "Examples:")
			}
			assert.Equal(t, res.stdout, runCLI(t, "", "help", c.name).stdout)
		})
	}

	res = runCLI(t, "", "frobnicate")
	assert.Equal(t, exitUsage, res.code)
	assert.Contains(t, res.stderr, `unknown command "frobnicate"`)

	// A flag before the command: the message shows the command first.
	res = runCLI(t, "", "--redis-url", "redis://127.0.0.1:1/0", "status", "abc")
	assert.Equal(t, exitUsage, res.code)
	assert.Equal(t, `starter: "--redis-url" is a flag, and flags go after the command: starter status --redis-url redis://127.0.0.1:1/0 abc`+"\n", res.stderr)
	res = runCLI(t, "", "--json")
	assert.Equal(t, exitUsage, res.code)
	assert.Contains(t, res.stderr, `starter: "--json" is a flag, and flags go after the command: starter COMMAND [flags] [args] (commands: submit, `)
}

func TestPriorityKeyFromNice(t *testing.T) {
	cases := []struct{ nice, key int }{
		{-20, 1}, {-10, 1}, {-9, 2}, {-1, 2}, {0, 3}, {1, 4}, {9, 4}, {10, 5}, {19, 5},
	}
	for _, tc := range cases {
		got, err := priorityKey(tc.nice)
		require.NoError(t, err)
		assert.Equal(t, tc.key, got, "nice %d", tc.nice)
	}
	for _, bad := range []int{-21, 20} {
		_, err := priorityKey(bad)
		assert.Error(t, err, "nice %d", bad)
	}
}

func TestParseMillis(t *testing.T) {
	cases := []struct {
		in   string
		want int
		ok   bool
	}{
		{"250", 250, true}, {"0", 0, true}, {"250ms", 250, true}, {"2s", 2000, true},
		{"-1", 0, false}, {"-1s", 0, false}, {"soon", 0, false}, {"", 0, false},
	}
	for _, tc := range cases {
		got, err := parseMillis(tc.in)
		if !tc.ok {
			assert.Error(t, err, tc.in)
			continue
		}
		require.NoError(t, err, tc.in)
		assert.Equal(t, tc.want, got, tc.in)
	}
}

func TestParseIdentAcceptsIdentsAndURLs(t *testing.T) {
	got, err := parseIdent("3mlbkdu1fpo7wt4lr2qf1mpsw")
	require.NoError(t, err)
	assert.Equal(t, "3mlbkdu1fpo7wt4lr2qf1mpsw", got)

	fromURL, err := parseIdent("https://example.com/")
	require.NoError(t, err)
	again, err := parseIdent("HTTPS://example.com:443")
	require.NoError(t, err)
	assert.Equal(t, fromURL, again, "the same URL gives the same ident")
	assert.NotEmpty(t, fromURL)
}

func TestHumanBytesAndUILink(t *testing.T) {
	assert.Equal(t, "512 B", humanBytes(512))
	assert.Equal(t, "1.5 KiB", humanBytes(1536))
	assert.Equal(t, "3.0 MiB", humanBytes(3<<20))
	cfg := testConfig()
	assert.Equal(t, "http://127.0.0.1:8233/namespaces/default/workflows/abc", uiLink(cfg.Temporal, "abc"))
}

func testConfig() *config.Config {
	c := config.Default()
	return &c
}

// TestSubmitRefusesURLsTheFetchPolicyDenies: arguments and -i lines whose
// address fetch.deny forbids, after DNS resolution, are refused before
// anything starts, each naming the rule.
func TestSubmitRefusesURLsTheFetchPolicyDenies(t *testing.T) {
	srv := testredis.Start(t)
	backend := []string{"--redis-url", srv.URL, "--temporal-address", closedAddr(t)}
	t.Setenv("ARCHIVEFLOW_FETCH_DENY", "169.254.0.0/16,fe80::/10,127.0.0.1:6379,127.0.0.0/8")
	urls := writeFile(t, "urls.txt", "https://example.com/\nhttp://[fe80::1]/\n")
	res := runCLI(t, "", append([]string{"submit", "http://169.254.169.254/latest/meta-data/", "http://localhost:8080/", "http://127.0.0.1:6379/", "-i", urls}, backend...)...)
	assert.Equal(t, exitUsage, res.code, "stderr: %s", res.stderr)
	for _, want := range []string{
		`argument 1: url "http://169.254.169.254/latest/meta-data/": denied by fetch.deny rule "169.254.0.0/16": the workers would refuse to fetch it`,
		`argument 2: url "http://localhost:8080/": denied by fetch.deny rule "127.0.0.0/8" (localhost resolves to 127.0.0.1)`,
		`argument 3: url "http://127.0.0.1:6379/": denied by fetch.deny rule "127.0.0.1:6379"`,
		urls + ` line 2: url "http://[fe80::1]/": denied by fetch.deny rule "fe80::/10"`,
	} {
		assert.Contains(t, res.stderr, want)
	}
	assert.NotContains(t, res.stderr, "example.com", "an allowed URL is not reported")
	assert.Empty(t, res.stdout)
	requireEmpty(t, srv)
}

// TestListShowsAJobCaughtMidMoveOnce: a job read while it moves between
// state sets (here: left in state:pending as well as state:active) is
// listed once, in the state its hash holds; --state pending leaves it out.
func TestListShowsAJobCaughtMidMoveOnce(t *testing.T) {
	srv := testredis.Start(t)
	ctx := context.Background()
	cfg := config.Default()
	store, err := rkeys.NewStore(srv.Client(), backend.StoreOptions(&cfg), zap.NewNop())
	require.NoError(t, err)
	const id = "3mlbkdu1fpo7wt4lr2qf1mpsw"
	require.NoError(t, store.CreateJob(ctx, rkeys.Job{Ident: id, URL: "https://example.com/", FetchDepth: model.FetchShallow,
		Settings: model.Settings{Concurrency: 1}, HooksTotal: 1, WorkflowID: id}))
	require.NoError(t, store.SetState(ctx, id, model.StateActive))
	require.NoError(t, srv.Client().SAdd(ctx, store.Keys().State(model.StatePending), id).Err(), "the half-done move")

	res := runCLI(t, "", "list", "--json", "--redis-url", srv.URL)
	require.Equal(t, exitOK, res.code, res.stderr)
	var out struct {
		Jobs []struct {
			Ident string         `json:"ident"`
			State model.JobState `json:"state"`
		} `json:"jobs"`
	}
	require.NoError(t, json.Unmarshal([]byte(res.stdout), &out))
	require.Len(t, out.Jobs, 1, res.stdout)
	assert.Equal(t, model.StateActive, out.Jobs[0].State)

	res = runCLI(t, "", "list", "--state", "pending", "--redis-url", srv.URL)
	require.Equal(t, exitOK, res.code, res.stderr)
	assert.Equal(t, "no jobs\n", res.stdout)
}

// TestListShowsACrawlAsACrawl: a crawl has no step of its own and its
// job hash counts only its start page's hooks, so list says "crawl" and
// the hooks done, not "0" and "N/0".
func TestListShowsACrawlAsACrawl(t *testing.T) {
	srv := testredis.Start(t)
	ctx := context.Background()
	cfg := config.Default()
	store, err := rkeys.NewStore(srv.Client(), backend.StoreOptions(&cfg), zap.NewNop())
	require.NoError(t, err)
	const snap, crawl = "3mlbkdu1fpo7wt4lr2qf1mpsw", "74zxqknaaxypb2x4x9ipsdsry"
	require.NoError(t, store.CreateJob(ctx, rkeys.Job{Ident: snap, URL: "https://example.com/", FetchDepth: model.FetchShallow,
		Settings: model.Settings{Concurrency: 1}, HooksTotal: 3, WorkflowID: snap}))
	require.NoError(t, store.CreateJob(ctx, rkeys.Job{Ident: crawl, URL: "https://example.org/", FetchDepth: model.FetchInf,
		Settings: model.Settings{Concurrency: 1}, WorkflowID: crawl}))

	res := runCLI(t, "", "list", "--redis-url", srv.URL)
	require.Equal(t, exitOK, res.code, res.stderr)
	assert.Regexp(t, regexp.MustCompile(snap+`  pending +0 +0 +0/3 `), res.stdout)
	assert.Regexp(t, regexp.MustCompile(crawl+`  pending +0 +crawl +0 `), res.stdout)
}

func TestSetNiceIsParsedAndChecked(t *testing.T) {
	c, err := parseSettingsChange([]string{"nice=-10"})
	require.NoError(t, err)
	require.NotNil(t, c.nice)
	assert.Equal(t, -10, *c.nice)
	assert.False(t, c.settings(), "nice alone changes no settings")
	for bad, want := range map[string]string{
		"nice=20":  "nice=20: nice 20: must be between -20 and 19",
		"nice=-21": "nice=-21: nice -21: must be between -20 and 19",
		"nice=low": "nice=low: must be an integer -20..19",
	} {
		_, err := parseSettingsChange([]string{bad})
		require.Error(t, err, bad)
		assert.Contains(t, err.Error(), want)
	}
}
