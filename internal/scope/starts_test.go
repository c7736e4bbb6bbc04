package scope

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestStartURLsReplaceTheJobURL: a URL-list crawl's start hosts are the
// listed URLs' hosts, each with its own directory; the list's own host is
// not a start host.
func TestStartURLsReplaceTheJobURL(t *testing.T) {
	ctx := context.Background()
	listed := []string{"http://a.example/docs/x", "http://A.example/docs/y", "http://b.example/", "ftp://c.example/", "http://a.example/blog/z"}
	assert.Equal(t, []string{"http://a.example/docs/x", "http://b.example/"}, Starts(listed, Config{}), "one per host")
	starts := Starts(listed, Config{PathPrefix: true})
	assert.Equal(t, []string{"http://a.example/docs/x", "http://b.example/", "http://a.example/blog/z"}, starts, "one per host and directory")

	sc, err := New("http://lists.example/l.txt", Config{PathPrefix: true, StartURLs: starts})
	require.NoError(t, err)
	j := &Judge{Scope: sc}
	for u, want := range map[string]Reason{
		"http://a.example/docs/deeper/p": Queued,
		"http://a.example/blog/p":        Queued,
		"http://b.example/anything":      Queued,
		"http://a.example/other/p":       ReasonOutside,
		"http://lists.example/l2.txt":    ReasonOutside,
	} {
		d := j.Link(ctx, false, Link{URL: u})
		assert.Equal(t, want, d.Reason, u)
		assert.False(t, d.NoRecurse, u)
	}
	d := j.Link(ctx, false, Link{URL: "http://lists.example/"})
	assert.Equal(t, "host lists.example is not a start host", d.Detail)

	off, err := New("http://lists.example/l.txt", Config{OffsiteOnce: true, StartURLs: starts})
	require.NoError(t, err)
	d = (&Judge{Scope: off}).Link(ctx, false, Link{URL: "http://lists.example/x"})
	assert.Equal(t, Queued, d.Reason)
	assert.True(t, d.NoRecurse, "the list's host is offsite")

	_, err = New("http://lists.example/l.txt", Config{StartURLs: []string{"mailto:x@y"}})
	require.Error(t, err)
}
