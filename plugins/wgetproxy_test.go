package plugins_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"sort"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/archiveflow/archiveflow/internal/egress"
	"github.com/archiveflow/archiveflow/internal/egress/egresstest"
	"github.com/archiveflow/archiveflow/internal/model"
	"github.com/archiveflow/archiveflow/internal/netpolicy"
	"github.com/archiveflow/archiveflow/internal/warc"
)

// TestWgetThroughTheFetchPolicyArchivesTheOriginsBytes: the wget hook,
// through an attempt's fetch proxy as a worker runs it, archives a page of
// a raw TCP origin sending valid but unusual HTTP (HTTP/1.0 with lower-case
// names and a close-delimited body, duplicate fields in odd order, chunk
// extensions, a trailer, gzip, 304, 206, 204): each WARC response block is
// the origin's bytes (egresstest.WgetRecords: wget's own reading aside) and
// each request block exactly what the origin received (wget records the
// absolute-form it sent the proxy; the hook makes it the origin-form the
// proxy sent, egress.ForwardedHead). Requisites on a
// denied address, a name that does not resolve and a port that refuses
// connections leave no record at all.
func TestWgetThroughTheFetchPolicyArchivesTheOriginsBytes(t *testing.T) {
	if _, err := exec.LookPath("wget"); err != nil {
		t.Skip("wget is not installed")
	}
	denied := egresstest.Guard(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	refusing := "http://" + ln.Addr().String() + "/refused.png"
	require.NoError(t, ln.Close())
	unanswered := []string{"http://" + denied.Addr + "/denied.png", "http://nowhere.test/unresolvable.png", refusing}

	answers := egresstest.UnusualAnswers()
	page := answers[egresstest.PathHTTP10]
	var extra strings.Builder
	for _, u := range unanswered {
		extra.WriteString(`<img src="` + u + `">`)
	}
	page.Bytes = []byte(strings.Replace(string(page.Bytes), "</body>", extra.String()+"</body>", 1))
	answers[egresstest.PathHTTP10] = page
	origin := egresstest.NewOrigin(t, answers)

	rules := []string{denied.Addr}
	pol, err := netpolicy.Parse(rules)
	require.NoError(t, err)
	pol = pol.WithLookup(func(context.Context, string) ([]netip.Addr, error) {
		return nil, errors.New("no such host")
	})
	proxy, err := egress.Start(egress.Options{Policy: pol})
	require.NoError(t, err)
	t.Cleanup(func() { _ = proxy.Close() })
	deny, err := json.Marshal(rules)
	require.NoError(t, err)

	snap := newSnapshot(t, origin.URL(egresstest.PathHTTP10))
	r := snap.runWithEnv(context.Background(), hookOf(t, "wget"), userAgent(t, "wget"),
		egress.EnvProxy+"="+proxy.URL(), egress.EnvDeny+"="+string(deny))
	requireFinal(t, r, model.StatusSucceeded)

	f, err := os.Open(snap.file("wget", "warc/archive.warc.gz"))
	require.NoError(t, err)
	defer f.Close()
	blocks := map[string]map[string][]string{"request": {}, "response": {}}
	require.NoError(t, warc.Read(f, func(h warc.Header, block io.Reader) error {
		b, err := io.ReadAll(block)
		if m := blocks[h.Type]; m != nil {
			m[h.TargetURI] = append(m[h.TargetURI], string(b))
		}
		return err
	}))
	paths := make([]string, 0, len(answers))
	for p := range answers {
		paths = append(paths, p)
	}
	sort.Strings(paths)
	for _, p := range paths {
		u := origin.URL(p)
		want, recorded := egresstest.WgetRecords(p, answers[p].Bytes)
		if !recorded {
			assert.Empty(t, blocks["response"][u], "wget recorded a response for %s", p)
		} else if assert.Len(t, blocks["response"][u], 1, "one response record for %s", p) {
			assert.Equal(t, string(want), blocks["response"][u][0], "the WARC response block of %s is not what the origin wrote", p)
		}
		recv := origin.Received(p)
		if assert.Len(t, recv, 1, "the origin got one request for %s", p) && assert.Len(t, blocks["request"][u], 1, "one request record for %s", p) {
			assert.Equal(t, string(recv[0]), blocks["request"][u][0],
				"the WARC request block of %s is not what the origin received", p)
		}
	}
	for _, u := range unanswered {
		assert.Empty(t, blocks["response"][u], "a response record for %s, which no site answered", u)
		assert.Empty(t, blocks["request"][u], "a request record for %s, which reached no site", u)
	}
	assert.Zero(t, denied.Connections(), "the denied port was connected to")
}
