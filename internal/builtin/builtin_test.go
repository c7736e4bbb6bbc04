package builtin

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/archiveflow/archiveflow/internal/builtin/hookio"
	"github.com/archiveflow/archiveflow/internal/egress"
	"github.com/archiveflow/archiveflow/internal/egress/egresstest"
	"github.com/archiveflow/archiveflow/internal/netpolicy"
)

func env(kv map[string]string) hookio.LookupEnv {
	return func(k string) (string, bool) {
		v, ok := kv[k]
		return v, ok
	}
}

func TestRunRejectsUnknownHook(t *testing.T) {
	var out, errb bytes.Buffer
	assert.Equal(t, ExitUsage, Run(context.Background(), []string{"nope"}, env(nil), &out, &errb))
	assert.Contains(t, errb.String(), `hook "nope": unknown; must be one of dom, favicon, hashes`)
	assert.Empty(t, out.String())
	assert.Equal(t, ExitUsage, Run(context.Background(), nil, env(nil), &out, &errb))
}

func TestRunInvalidInvocationIsASoftFailure(t *testing.T) {
	var out, errb bytes.Buffer
	code := Run(context.Background(), []string{"headers", "--url=file:///etc/passwd"}, env(nil), &out, &errb)
	assert.Equal(t, ExitOK, code, "printed failed + exit 0: not retried")
	var rec map[string]any
	require.NoError(t, json.Unmarshal(out.Bytes(), &rec))
	assert.Equal(t, "failed", rec["status"])
	assert.Contains(t, rec["error"], "must be an absolute http or https URL")
}

func TestRunDisabled(t *testing.T) {
	var out, errb bytes.Buffer
	code := Run(context.Background(), []string{"wget", "--url=http://h/"}, env(map[string]string{"WGET_ENABLED": "False"}), &out, &errb)
	assert.Equal(t, hookio.ExitSkipped, code)
	assert.JSONEq(t, `{"type":"ArchiveResult","status":"skipped","output_str":"WGET_ENABLED is False"}`, out.String())
}

func TestPosixRegex(t *testing.T) {
	tests := []struct{ in, want string }{
		{`\.jpg$`, `\.jpg$`},
		{`/page/\d+`, `/page/[0-9]+`},
		{`\w+\s\S\W\D`, `[[:alnum:]_]+[[:space:]][^[:space:]][^[:alnum:]_][^0-9]`},
		{`(?:a|b)c`, `(a|b)c`},
		{`\\d`, `\\d`},
		{`trailing\`, `trailing\`},
	}
	for _, tt := range tests {
		assert.Equal(t, tt.want, posixRegex(tt.in), tt.in)
	}
}

func TestWgetArgs(t *testing.T) {
	base := []string{"--no-config", "-e", "robots=off", "--page-requisites", "--warc-file=warc/archive",
		"--progress=dot:giga", "--tries=2", "--waitretry=0", "--timeout=60"}
	tests := []struct {
		name  string
		env   map[string]string
		extra []string
		want  []string
	}{
		{"shallow", nil, nil, append(append([]string{}, base...), "--span-hosts", "--", "http://h/a b")},
		{"inf with everything", map[string]string{
			"FETCH_DEPTH": "inf", "USER_AGENT": "UA 1", "DELAY_MIN": "250", "DELAY_MAX": "750",
			"IGNORE_PATTERNS": `["\\.jpg$","/x/\\d+"]`,
		}, []string{"--no-cookies"}, append(append([]string{}, base...),
			"--user-agent=UA 1", "--recursive", "--level=inf", "--no-parent",
			"--wait=0.500", "--random-wait", "--regex-type=posix", `--reject-regex=(\.jpg$)|(/x/[0-9]+)`,
			"--no-cookies", "--", "http://h/a b")},
		{"fixed delay", map[string]string{"DELAY_MIN": "1000", "DELAY_MAX": "1000"}, nil,
			append(append([]string{}, base...), "--span-hosts", "--wait=1.000", "--", "http://h/a b")},
		{"through the fetch proxy", map[string]string{"FETCH_PROXY": "http://127.0.0.1:3128"}, nil,
			append(append([]string{}, base...), "-e", "use_proxy=on", "-e", "http_proxy=http://127.0.0.1:3128",
				"-e", "https_proxy=http://127.0.0.1:3128", "-e", "no_proxy=", "--span-hosts", "--", "http://h/a b")},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			inv, err := hookio.Parse("wget", []string{"--url=http://h/a b"}, env(tt.env))
			require.NoError(t, err)
			assert.Equal(t, tt.want, wgetArgs(inv, tt.extra))
		})
	}
}

func TestIconExt(t *testing.T) {
	tests := []struct{ ctype, url, want string }{
		{"image/png", "http://h/x", ".png"},
		{"image/vnd.microsoft.icon", "http://h/x.png", ".ico"},
		{"image/svg+xml; charset=utf-8", "", ".svg"},
		{"application/octet-stream", "http://h/icon.GIF?v=2", ".gif"},
		{"", "http://h/favicon", ".ico"},
	}
	for _, tt := range tests {
		assert.Equal(t, tt.want, iconExt(tt.ctype, tt.url), tt.ctype+" "+tt.url)
	}
}

func TestIsTempFile(t *testing.T) {
	assert.True(t, isTempFile("screenshot/.partial.screenshot.png"))
	assert.True(t, isTempFile("wget/.wget.json.tmp12345"))
	assert.False(t, isTempFile("wget/wget.json"))
	assert.False(t, isTempFile("wget/host/.well-known"))
}

// wget terminated by a SIGTERM this process has not seen (the runner
// signals the whole process group) was stopped, not a failed fetch.
func TestWgetEndedBySIGTERMIsStopped(t *testing.T) {
	dir := t.TempDir()
	t.Chdir(dir)
	fake := filepath.Join(dir, "fake-wget")
	require.NoError(t, os.WriteFile(fake, []byte("#!/bin/sh\nkill -TERM $$\n"), 0o755))
	var out, errb bytes.Buffer

	code := Run(context.Background(), []string{"wget", "--url=http://127.0.0.1:1/"}, env(map[string]string{"WGET_BINARY": fake}), &out, &errb)

	assert.Equal(t, ExitOK, code, errb.String())
	var rec struct {
		Status     string         `json:"status"`
		OutputJSON map[string]any `json:"output_json"`
	}
	require.NoError(t, json.Unmarshal(out.Bytes(), &rec), out.String())
	assert.Equal(t, "noresults", rec.Status)
	assert.Equal(t, true, rec.OutputJSON["stopped"])
}

// TestGoFetchersAreHeldByTheFetchPolicy: every built-in Go fetcher
// (headers, favicon, title and outlinks when they must fetch the page,
// pagefetch) dials through the policy of its FETCH_DENY
// (egress.Transport), proxy or not: a seed that redirects (301, 302, 303,
// 307, 308) to a denied port, spelled as the address, its IPv4-mapped
// IPv6 form or its decimal, octal or hex spellings, and a denied https://
// seed end as a final failure naming the rule, with the refusal's line on
// stderr, no Response record for the denied hop, and no connection to the
// denied port. An allowed page still works.
func TestGoFetchersAreHeldByTheFetchPolicy(t *testing.T) {
	guard := egresstest.Guard(t)
	denied := guard.Addr
	port := guard.Port()
	spellings := map[string]string{
		"addr":    denied,
		"mapped":  fmt.Sprintf("[::ffff:127.0.0.1]:%d", port),
		"decimal": fmt.Sprintf("2130706433:%d", port),
		"octal":   fmt.Sprintf("0177.0.0.01:%d", port),
		"hex":     fmt.Sprintf("0x7f.0.0.1:%d", port),
	}
	site := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if host, ok := spellings[r.URL.Query().Get("to")]; ok {
			code, _ := strconv.Atoi(r.URL.Query().Get("code"))
			http.Redirect(w, r, "http://"+host+"/x", code)
			return
		}
		w.Header().Set("Content-Type", "text/html")
		if icon := r.URL.Query().Get("icon"); icon != "" {
			fmt.Fprintf(w, `<title>icon</title><link rel="icon" href="/?to=%s&amp;code=302">`, icon)
			return
		}
		fmt.Fprint(w, "<title>ok</title>")
	}))
	defer site.Close()
	deny, err := json.Marshal([]string{denied})
	require.NoError(t, err)
	// A proxy as the engine starts one: the Go fetchers do not need it.
	pol, err := netpolicy.Parse([]string{denied})
	require.NoError(t, err)
	proxy, err := egress.Start(egress.Options{Policy: pol})
	require.NoError(t, err)
	defer proxy.Close()

	run := func(hook, url string) (rec map[string]any, responses []string, stderr string) {
		t.Helper()
		t.Chdir(t.TempDir())
		var out, errb bytes.Buffer
		code := Run(context.Background(), []string{hook, "--url=" + url},
			env(map[string]string{"FETCH_PROXY": proxy.URL(), egress.EnvDeny: string(deny), "PAGEFETCH_ENABLED": "True"}), &out, &errb)
		require.Equal(t, ExitOK, code, errb.String())
		lines := bytes.Split(bytes.TrimSpace(out.Bytes()), []byte("\n"))
		for _, l := range lines {
			var r map[string]any
			require.NoError(t, json.Unmarshal(l, &r), string(l))
			if r["type"] == "Response" {
				responses = append(responses, fmt.Sprint(r["url"]))
			} else {
				rec = r
			}
		}
		return rec, responses, errb.String()
	}
	for _, hook := range []string{"headers", "title", "outlinks", "pagefetch"} {
		rec, _, stderr := run(hook, site.URL+"/")
		assert.Contains(t, []any{"succeeded", "noresults"}, rec["status"], "%s: %s", hook, stderr)
	}
	for name, host := range spellings {
		for _, code := range []int{301, 302, 303, 307, 308} {
			seed := fmt.Sprintf("%s/?to=%s&code=%d", site.URL, name, code)
			target := "http://" + host + "/x"
			for _, hook := range []string{"headers", "title", "outlinks", "pagefetch"} {
				rec, responses, stderr := run(hook, seed)
				assert.Equal(t, "failed", rec["status"], "%s %s: %s", hook, seed, stderr)
				assert.Contains(t, rec["error"], fmt.Sprintf("fetch of %s denied by fetch.deny rule %q", target, denied), hook)
				assert.Contains(t, stderr, fmt.Sprintf("archiveflow: fetch of %s denied by fetch.deny rule %q", target, denied), hook)
				assert.NotContains(t, responses, target, "%s: a refusal is not a response", hook)
			}
		}
	}
	rec, _, _ := run("headers", "https://"+denied+"/")
	assert.Equal(t, "failed", rec["status"])
	assert.Equal(t, fmt.Sprintf("headers: fetch of https://%s/ denied by fetch.deny rule %q", denied, denied), rec["error"])

	// favicon: the page's icon links redirect to the denied port; the
	// refusals leave no icon and no failure (/favicon.ico is tried).
	for name := range spellings {
		rec, responses, stderr := run("favicon", fmt.Sprintf("%s/icon-page?icon=%s", site.URL, name))
		assert.Equal(t, "noresults", rec["status"], stderr)
		target := "http://" + spellings[name] + "/x"
		assert.Contains(t, stderr, fmt.Sprintf("archiveflow: fetch of %s denied by fetch.deny rule %q", target, denied))
		assert.NotContains(t, responses, target)
	}
	assert.Zero(t, guard.Connections(), "the denied port was connected to")
}

// TestParsingHooksReadNothingOutsideTheSnapshot: the rendered DOM linked
// to /etc/passwd and summary files naming paths out of the snapshot are
// refused as page sources; the title hook falls back to fetching the page.
func TestParsingHooksReadNothingOutsideTheSnapshot(t *testing.T) {
	site := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprint(w, "<title>Safe</title>")
	}))
	defer site.Close()
	snap := t.TempDir()
	for _, d := range []string{"dom", "headers", "wget", "title", "outlinks"} {
		require.NoError(t, os.MkdirAll(filepath.Join(snap, d), 0o755))
	}
	require.NoError(t, os.Symlink("/etc/passwd", filepath.Join(snap, "dom", "output.html")))
	require.NoError(t, os.WriteFile(filepath.Join(snap, "headers", "headers.json"), []byte(`{"body_file":"../../../../../../etc/passwd","final_url":"`+site.URL+`"}`), 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(snap, "wget", "wget.json"), []byte(`{"main_file":"../../../../../../etc/passwd","main_url":"`+site.URL+`"}`), 0o644))

	for _, hook := range []string{"title", "outlinks"} {
		t.Chdir(filepath.Join(snap, hook))
		var out, errb bytes.Buffer
		code := Run(context.Background(), []string{hook, "--url=" + site.URL + "/", "--snapshot-id=snap-1"}, env(map[string]string{"SNAP_DIR": snap}), &out, &errb)
		require.Equal(t, ExitOK, code, errb.String())
		assert.Contains(t, out.String(), `"source":"fetch"`, "%s: only the fetched page is a source", hook)
		assert.NotContains(t, out.String(), "root:", hook)
		if hook == "title" {
			assert.Contains(t, out.String(), `{"type":"Snapshot","id":"snap-1","title":"Safe"}`,
				"the title hook sets the snapshot's title with a Snapshot record, as any hook does")
		}
	}
	title, err := os.ReadFile(filepath.Join(snap, "title", "title.txt"))
	require.NoError(t, err)
	assert.Equal(t, "Safe\n", string(title))
}

// A fetch that gets no answer names the URL once (net/http's error names
// it too), and the hop it failed at when a redirect led there.
func TestAFetchWithoutAnswerNamesItsURLOnce(t *testing.T) {
	gone := httptest.NewServer(http.NotFoundHandler())
	refused := gone.URL + "/x"
	gone.Close() // refused from now on
	site := httptest.NewServer(http.RedirectHandler(refused, http.StatusFound))
	defer site.Close()

	for url, want := range map[string]string{
		refused:         "headers: get " + refused + ": dial tcp ",
		site.URL + "/r": "headers: get " + site.URL + "/r: redirected to " + refused + ": dial tcp ",
	} {
		t.Chdir(t.TempDir())
		var out, errb bytes.Buffer
		code := Run(context.Background(), []string{"headers", "--url=" + url}, env(nil), &out, &errb)
		assert.NotEqual(t, ExitOK, code, "no answer is no result: retried")
		lines := strings.Split(strings.TrimSpace(errb.String()), "\n")
		last := lines[len(lines)-1]
		assert.True(t, strings.HasPrefix(last, want), "%q", last)
		assert.Contains(t, last, "connection refused")
		assert.NotContains(t, last, `Get "`, "net/http's own naming of the URL is not repeated")
	}
}
