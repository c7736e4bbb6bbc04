package egress

import (
	"context"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/archiveflow/archiveflow/internal/egress/egresstest"
	"github.com/archiveflow/archiveflow/internal/warc"
)

// warcBlocks reads a WARC file: target URI → the blocks of its records of
// type typ, in file order.
func warcBlocks(t *testing.T, path, typ string) map[string][][]byte {
	t.Helper()
	f, err := os.Open(path)
	require.NoError(t, err)
	defer f.Close()
	out := map[string][][]byte{}
	require.NoError(t, warc.Read(f, func(h warc.Header, block io.Reader) error {
		if h.Type != typ {
			return nil
		}
		b, err := io.ReadAll(block)
		out[h.TargetURI] = append(out[h.TargetURI], b)
		return err
	}))
	return out
}

// TestWgetThroughTheProxyArchivesTheOriginsBytes: wget started as a
// third-party hook would (the proxy in http_proxy, its own --warc-file)
// fetches valid but unusual answers of a raw TCP origin through the
// proxy; each WARC response block is byte for byte what the origin wrote
// (egresstest.WgetRecords), and each request block what the origin received but for
// the request-target, which wget records in the absolute-form it sent the
// proxy. A denied address, a name that does not resolve and a port that
// refuses connections leave no response record.
func TestWgetThroughTheProxyArchivesTheOriginsBytes(t *testing.T) {
	if _, err := exec.LookPath("wget"); err != nil {
		t.Skip("wget is not installed")
	}
	h := newHarness(t)
	answers := egresstest.UnusualAnswers()
	origin := egresstest.NewOrigin(t, answers)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	refusing := "http://" + ln.Addr().String() + "/refused"
	require.NoError(t, ln.Close())
	unanswered := []string{"http://" + h.denied.Addr + "/denied", "http://nowhere.test/unresolvable", refusing}

	dir := t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	args := []string{"--no-config", "-e", "robots=off", "--page-requisites", "--tries=1",
		"--timeout=20", "--warc-file=" + filepath.Join(dir, "archive"), "-P", dir, "--", origin.URL(egresstest.PathHTTP10)}
	cmd := exec.CommandContext(ctx, "wget", append(args, unanswered...)...)
	cmd.Env = append(os.Environ(), "LC_ALL=C")
	for _, v := range ProxyVars {
		cmd.Env = append(cmd.Env, v+"="+h.proxy.URL())
	}
	out, _ := cmd.CombinedOutput() // wget exits 8: the 304, the refusals
	t.Logf("wget:\n%s", out)

	warcPath := filepath.Join(dir, "archive.warc.gz")
	responses := warcBlocks(t, warcPath, "response")
	requests := warcBlocks(t, warcPath, "request")
	for _, p := range sortedPaths(answers) {
		u := origin.URL(p)
		want, recorded := egresstest.WgetRecords(p, answers[p].Bytes)
		if !recorded {
			assert.Empty(t, responses[u], "wget recorded a response for %s", p)
		} else if assert.Len(t, responses[u], 1, "one response record for %s", p) {
			assert.Equal(t, string(want), string(responses[u][0]), "the WARC response block of %s is not what the origin wrote", p)
		}
		recv := origin.Received(p)
		if assert.Len(t, recv, 1, "the origin got one request for %s", p) && assert.Len(t, requests[u], 1, "one request record for %s", p) {
			assert.Equal(t, string(recv[0]), string(egresstest.AsForwarded(requests[u][0], origin.Addr)), "the WARC request block of %s is not what the origin received", p)
		}
	}
	for _, u := range unanswered {
		assert.Empty(t, responses[u], "a response record for %s, which no site answered", u)
	}
	assert.Zero(t, h.denied.Connections(), "the denied port was connected to")
	require.Len(t, h.denials(), 1)
	assert.Equal(t, unanswered[0], h.denials()[0].Target)
}

func sortedPaths(answers map[string]egresstest.Answer) []string {
	paths := make([]string, 0, len(answers))
	for p := range answers {
		paths = append(paths, p)
	}
	sort.Strings(paths)
	return paths
}

// TestCurlThroughTheProxyGetsTheOriginsBytes: curl, as a hook's fetcher
// using the proxy variables, receives every unusual answer exactly as the
// origin wrote it (--raw: no decoding of chunks; -i: the head as read).
func TestCurlThroughTheProxyGetsTheOriginsBytes(t *testing.T) {
	if _, err := exec.LookPath("curl"); err != nil {
		t.Skip("curl is not installed: the curl path is not checked")
	}
	h := newHarness(t)
	answers := egresstest.UnusualAnswers()
	origin := egresstest.NewOrigin(t, answers)
	paths := sortedPaths(answers)
	dir := t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	// One curl for every URL: its kept-alive connection to the proxy
	// carries several requests.
	args := []string{"--silent", "--show-error", "--raw", "--include", "--max-time", "20"}
	for i, p := range paths {
		args = append(args, "--output", filepath.Join(dir, fmt.Sprint(i)), origin.URL(p))
	}
	cmd := exec.CommandContext(ctx, "curl", args...)
	cmd.Env = append(os.Environ(), "http_proxy="+h.proxy.URL(), "HTTPS_PROXY="+h.proxy.URL(), "NO_PROXY=", "no_proxy=")
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "curl: %s", out)
	for i, p := range paths {
		got, err := os.ReadFile(filepath.Join(dir, fmt.Sprint(i)))
		require.NoError(t, err)
		assert.Equal(t, string(answers[p].Bytes), string(got), "curl did not get what the origin wrote for %s", p)
		for _, r := range origin.Received(p) {
			assert.NotContains(t, strings.ToLower(string(r)), "proxy-authorization", "a credential for the proxy reached the origin")
			assert.True(t, strings.HasPrefix(string(r), "GET "+p+" HTTP/1.1\r\n"), "not in origin-form: %q", r)
		}
	}
}
