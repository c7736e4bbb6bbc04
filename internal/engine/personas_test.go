package engine

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

// abx-dl's PERSONAS_DIR: a profile root per crawl (per snapshot under
// CHROME_ISOLATION=snapshot) unless one is configured.
func TestHooksGetAPersonasDirOfTheirCrawl(t *testing.T) {
	inv := invocation{snapDir: "/a/crawls/c/i/pages/2", crawlDir: "/a/crawls/c/i"}
	for _, tc := range []struct {
		name string
		env  []string
		want string
	}{
		{"unset: the crawl's", []string{"PATH=/bin"}, "/a/crawls/c/i/.persona"},
		{"empty (the plugins' default): the crawl's", []string{"PERSONAS_DIR=", "CHROME_ISOLATION=crawl"}, "/a/crawls/c/i/.persona"},
		{"snapshot isolation: the snapshot's", []string{"CHROME_ISOLATION=Snapshot"}, "/a/crawls/c/i/pages/2/.persona"},
		{"configured: kept", []string{"PERSONAS_DIR=/srv/personas", "CHROME_ISOLATION=snapshot"}, "/srv/personas"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			env := withPersonasDir(append([]string(nil), tc.env...), inv)
			var got []string
			for _, kv := range env {
				if len(kv) > len(personasKey) && kv[:len(personasKey)+1] == personasKey+"=" {
					got = append(got, kv[len(personasKey)+1:])
				}
			}
			assert.Equal(t, []string{tc.want}, got)
		})
	}
	env := withPersonasDir(nil, invocation{snapDir: "/a/snapshots/s"})
	assert.Equal(t, []string{"PERSONAS_DIR=/a/snapshots/s/.persona"}, env, "no crawl dir: the snapshot's")
}
