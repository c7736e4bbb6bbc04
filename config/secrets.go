package config

import (
	"net/url"
	"slices"
	"strings"
)

// secretKeys are the configuration keys whose values are archiveflow's own
// secrets: the credentials of its Redis and Temporal connections and the
// paths of its TLS private keys. They stay in the processes that connect:
// never in a hook's environment, a log, workflow history or Redis.
var secretKeys = []string{"redis.url", "redis.password", "temporal.api_key", "redis.tls.key_file", "temporal.tls.key_file"}

// minSecretMatch is the shortest secret value looked for inside longer
// text; a shorter one only matches a whole value (a one-letter password
// would otherwise match nearly everything).
const minSecretMatch = 6

// Secrets are the secret values of one configuration, whatever set them
// (file, environment or flags). The zero value knows no values but still
// recognises the environment variables that carry secrets.
type Secrets struct {
	values []string
}

// Secrets returns c's secret values that are set: every secret key's
// value and the password inside redis.url.
func (c *Config) Secrets() Secrets {
	var vals []string
	add := func(v string) {
		if v != "" && !slices.Contains(vals, v) {
			vals = append(vals, v)
		}
	}
	add(c.Redis.URL)
	if u, err := url.Parse(c.Redis.URL); err == nil && u.User != nil {
		if p, ok := u.User.Password(); ok {
			add(p)
			add(url.QueryEscape(p)) // as it may appear in another URL
		}
	}
	add(c.Redis.Password)
	add(c.Temporal.APIKey)
	add(c.Redis.TLS.KeyFile)
	add(c.Temporal.TLS.KeyFile)
	// Longest first, so Redact replaces a URL before the password in it.
	slices.SortStableFunc(vals, func(a, b string) int { return len(b) - len(a) })
	return Secrets{values: vals}
}

// secretEnv are the environment variables that set a secret key.
var secretEnv = func() []string {
	out := make([]string, len(secretKeys))
	for i, k := range secretKeys {
		out[i] = EnvPrefix + "_" + strings.ToUpper(strings.ReplaceAll(k, ".", "_"))
	}
	return out
}()

// SecretEnv returns the names of the environment variables that set a
// secret key (ARCHIVEFLOW_REDIS_URL, ...).
func SecretEnv() []string { return slices.Clone(secretEnv) }

// Values returns the secret values, longest first (for tests that scan
// output for them).
func (s Secrets) Values() []string { return slices.Clone(s.values) }

// In reports whether text reveals a secret: it is one, or contains one of
// at least 6 bytes.
func (s Secrets) In(text string) bool {
	for _, v := range s.values {
		if text == v || len(v) >= minSecretMatch && strings.Contains(text, v) {
			return true
		}
	}
	return false
}

// Reveals reports whether the environment entry name=value would hand a
// secret to whoever reads it: name is one of SecretEnv, or value reveals a
// secret value.
func (s Secrets) Reveals(name, value string) bool {
	return slices.Contains(secretEnv, name) || s.In(value)
}

// Redact replaces every secret value in text by "xxxxx" (short values only
// when they are the whole text).
func (s Secrets) Redact(text string) string {
	for _, v := range s.values {
		switch {
		case text == v:
			return "xxxxx"
		case len(v) >= minSecretMatch:
			text = strings.ReplaceAll(text, v, "xxxxx")
		}
	}
	return text
}
