package ident

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Known vectors. Each ident was computed independently of this package with
// Python's uuid.uuid5(UUID("82244de1-c354-4c89-bf2b-f153ce23af43"), url).int
// rendered in base36 — the same algorithm as ArchiveBot's
// UUIDTools::UUID.sha1_create(ns, url).to_i.to_s(36) (SHA-1 over the 16
// namespace bytes followed by the URL's bytes, version and variant bits set).
func TestFromURLKnownVectors(t *testing.T) {
	tests := []struct {
		raw, normalized, ident string
	}{
		{"http://example.com/", "http://example.com/", "9tfs9o6557kgozy0wlqrzal3o"},
		{"HTTP://EXAMPLE.com", "http://example.com/", "9tfs9o6557kgozy0wlqrzal3o"},
		{"http://example.com:80", "http://example.com/", "9tfs9o6557kgozy0wlqrzal3o"},
		{"https://www.ArchiveTeam.org:443/", "https://www.archiveteam.org/", "c77ecq4u7nh3n9r7v8xd9h73e"},
		{"http://example.com/a%20b?q=1#frag", "http://example.com/a%20b?q=1#frag", "d38fpqiw1vqrvp3vuxkmuv0o8"},
		{"http://example.com/a b?q=1#frag", "http://example.com/a%20b?q=1#frag", "d38fpqiw1vqrvp3vuxkmuv0o8"},
		{"http://example.com/%61%2fb/../a%20b?q=1#frag", "http://example.com/a%20b?q=1#frag", "d38fpqiw1vqrvp3vuxkmuv0o8"},
		{"http://bücher.example/", "http://xn--bcher-kva.example/", "axg1c5qs0q1d442b9zprr0gbt"},
	}
	for _, tc := range tests {
		t.Run(tc.raw, func(t *testing.T) {
			id, norm, err := FromURL(tc.raw)
			require.NoError(t, err)
			assert.Equal(t, tc.normalized, norm)
			assert.Equal(t, tc.ident, id)
		})
	}
}

func TestNormalizeRules(t *testing.T) {
	tests := []struct{ raw, want string }{
		{"http://Example.COM", "http://example.com/"},
		{"https://example.com:8443/x", "https://example.com:8443/x"},
		{"https://example.com:443/x", "https://example.com/x"},
		{"http://example.com:443/x", "http://example.com:443/x"},
		{"http://example.com:/x", "http://example.com/x"},
		{"http://example.com/%7euser/%e2%82%ac", "http://example.com/~user/%E2%82%AC"},
		{"http://example.com/€", "http://example.com/%E2%82%AC"},
		{"http://example.com/a/./b/../c", "http://example.com/a/c"},
		{"http://example.com/100%", "http://example.com/100%25"},
		{"http://example.com?", "http://example.com/?"},
		{"http://example.com/?a=b+c&d=%2B", "http://example.com/?a=b+c&d=%2B"},
		{"http://User:Pa%73s@Example.com/", "http://User:Pass@example.com/"},
		{"http://[2001:DB8::1]:80/", "http://[2001:db8::1]/"},
		{"  http://example.com/  ", "http://example.com/"},
	}
	for _, tc := range tests {
		t.Run(tc.raw, func(t *testing.T) {
			got, err := Normalize(tc.raw)
			require.NoError(t, err)
			assert.Equal(t, tc.want, got)
		})
	}
}

func TestFromURLErrors(t *testing.T) {
	tests := []struct{ raw, rule string }{
		{"", "must not be empty"},
		{"example.com/path", "must be absolute"},
		{"/relative", "must be absolute"},
		{"ftp://example.com/", "must be http or https"},
		{"javascript://alert(1)", "must be http or https"},
		{"http:///path", "must have a host"},
		{"http://user@/path", "must have a host"},
		{"http://example.com:80a/", "port \"80a\" must be decimal digits"},
		{"http://example.com:1234567/", "must be at most 65535"},
		{"http://[::1/", "must be closed"},
		{"http://[zz]/", "not a valid IPv6 literal"},
		{"http://exa mple.com/", "not allowed in a host name"},
		{"http://example.com/\x00", "control characters"},
		{"http://example.com/" + strings.Repeat("a", 10000), "10019 bytes: a job's URL must be at most 2048 bytes"},
		// Percent-encoding grows a URL: the limit is on the normal form.
		{"http://example.com/" + strings.Repeat("é", 500), "3019 bytes: a job's URL must be at most 2048 bytes"},
	}
	for _, tc := range tests {
		t.Run(tc.raw, func(t *testing.T) {
			id, norm, err := FromURL(tc.raw)
			require.Error(t, err)
			assert.Empty(t, id)
			assert.Empty(t, norm)
			assert.Contains(t, err.Error(), tc.rule)
			assert.Contains(t, err.Error(), "url ")
		})
	}
}

func TestFromURLTakesTheLongestJobURL(t *testing.T) {
	raw := "http://example.com/" + strings.Repeat("a", MaxURLBytes-len("http://example.com/"))
	_, norm, err := FromURL(raw)
	require.NoError(t, err)
	assert.Len(t, norm, MaxURLBytes)
}

func TestIdentShape(t *testing.T) {
	for _, raw := range []string{"http://a.example/", "https://b.example/x?y", "http://c.example/z#f"} {
		id, _, err := FromURL(raw)
		require.NoError(t, err)
		assert.LessOrEqual(t, len(id), 25)
		assert.Regexp(t, `^[0-9a-z]+$`, id)
		again, _, err := FromURL(raw)
		require.NoError(t, err)
		assert.Equal(t, id, again, "ident must be deterministic")
	}
}

func FuzzFromURL(f *testing.F) {
	for _, s := range []string{"http://example.com/", "https://[::1]:443/a/../b?c#d", "http://bücher.example/%zz", "ftp://x", ""} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, raw string) {
		id, norm, err := FromURL(raw)
		if err != nil {
			if err.Error() == "" {
				t.Fatalf("empty error for %q", raw)
			}
			return
		}
		if id == "" || norm == "" {
			t.Fatalf("empty result for %q", raw)
		}
		// Normalisation is idempotent: the normal form maps to itself.
		again, err := Normalize(norm)
		if err != nil {
			t.Fatalf("normal form %q of %q rejected: %v", norm, raw, err)
		}
		if again != norm {
			t.Fatalf("normalisation not idempotent: %q -> %q -> %q", raw, norm, again)
		}
	})
}
