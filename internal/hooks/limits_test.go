package hooks

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func ptr[T any](v T) *T { return &v }

func TestResolvedLimits(t *testing.T) {
	assert.Equal(t, "PARSE_DOM_MAX_MEMORY", MaxMemoryKey("parse-dom"))
	assert.Equal(t, "WGET_MAX_CPU_SECONDS", MaxCPUSecondsKey("wget"))
	assert.Equal(t, "WGET_MAX_OPEN_FILES", MaxOpenFilesKey("wget"))
	assert.Equal(t, "WGET_MAX_PROCESSES", MaxProcessesKey("wget"))

	tests := []struct {
		name string
		doc  string
		src  Sources
		want Limits
	}{
		{"nothing set", `{}`, Sources{}, Limits{}},
		{"env, every key", `{}`, Sources{Env: map[string]string{
			"WGET_MAX_MEMORY": "512MiB", "WGET_MAX_CPU_SECONDS": "1.5", "WGET_MAX_OPEN_FILES": "256", "WGET_MAX_PROCESSES": "64",
		}}, Limits{Memory: ptr(int64(512 << 20)), CPUTime: ptr(1500 * time.Millisecond), OpenFiles: ptr(int64(256)), Processes: ptr(int64(64))}},
		{"config file, typed values", `{}`, Sources{File: map[string]any{"wget_max_memory": 1 << 30, "WGET_MAX_PROCESSES": 10}},
			Limits{Memory: ptr(int64(1 << 30)), Processes: ptr(int64(10))}},
		{"config.json default", `{"properties":{"WGET_MAX_MEMORY":{"type":"string","default":"2GiB"}}}`, Sources{},
			Limits{Memory: ptr(int64(2 << 30))}},
		{"env beats file and default", `{"properties":{"WGET_MAX_MEMORY":{"type":"string","default":"2GiB"}}}`,
			Sources{Env: map[string]string{"WGET_MAX_MEMORY": "1GB"}, File: map[string]any{"wget_max_memory": "3GiB"}},
			Limits{Memory: ptr(int64(1e9))}},
		{"zero is no limit, and set", `{}`, Sources{Env: map[string]string{"WGET_MAX_MEMORY": "0"}}, Limits{Memory: ptr(int64(0))}},
		{"a job cannot set or lift a limit", `{}`, Sources{Job: map[string]string{"WGET_MAX_MEMORY": "0", "WGET_MAX_PROCESSES": "9"}}, Limits{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res, err := mustSchema(t, "wget", tt.doc).Resolve(tt.src)
			require.NoError(t, err)
			assert.Equal(t, tt.want, res.Limits())
		})
	}
	for key, bad := range map[string]string{
		"WGET_MAX_MEMORY":      "512M",
		"WGET_MAX_CPU_SECONDS": "-1",
		"WGET_MAX_OPEN_FILES":  "1.5",
		"WGET_MAX_PROCESSES":   "many",
	} {
		t.Run("invalid "+key, func(t *testing.T) {
			_, err := mustSchema(t, "wget", `{}`).Resolve(Sources{Env: map[string]string{key: bad}})
			ce := requireConfigError(t, err, key, bad, "")
			assert.Equal(t, "env:"+key, ce.Source)
		})
	}
	_, err := mustSchema(t, "wget", `{}`).Resolve(Sources{Env: map[string]string{"WGET_MAX_MEMORY": "512M"}})
	assert.ErrorContains(t, err, "write 512MiB (powers of 1024) or 512MB")
}
