package devserver

import (
	"path/filepath"
	"runtime"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"
)

func TestResolveAppliesDefaults(t *testing.T) {
	r, err := Options{}.resolve()
	require.NoError(t, err)
	assert.Equal(t, "default", r.namespace)
	assert.Equal(t, "127.0.0.1", r.bindIP)
	assert.Equal(t, "127.0.0.1", r.dialIP)
	assert.Equal(t, 0, r.frontendPort)
	assert.Equal(t, 0, r.uiPort)
	assert.Equal(t, "", r.dataDir, "no data dir means in-memory")
	assert.Equal(t, zapcore.WarnLevel, r.serverLevel)
	assert.NotNil(t, r.log)
	assert.Equal(t, 1000, r.dynamic["history.transferprocessormaxpollrps"])
	assert.Equal(t, 1000, r.dynamic["history.timerprocessormaxpollrps"])
	assert.Equal(t, true, r.dynamic["system.forcesearchattributescacherefreshonread"])
}

func TestResolveMakesDataDirAbsolute(t *testing.T) {
	t.Chdir(t.TempDir())
	r, err := Options{DataDir: "state"}.resolve()
	require.NoError(t, err)
	assert.True(t, filepath.IsAbs(r.dataDir), r.dataDir)
	assert.Equal(t, "state", filepath.Base(r.dataDir))
}

func TestResolveRejectsBadInput(t *testing.T) {
	tests := []struct {
		name string
		opts Options
		want []string // substrings of the error: the thing, the value, the rule
	}{
		{"namespace with space", Options{Namespace: "my ns"}, []string{"namespace", `"my ns"`, "letters, digits"}},
		{"namespace starting with dot", Options{Namespace: ".ns"}, []string{"namespace", `".ns"`, "starting with a letter or digit"}},
		{"IP not an address", Options{IP: "127.0.0.300"}, []string{"IP", `"127.0.0.300"`, "IPv4 or IPv6"}},
		{"IP hostname", Options{IP: "example.org"}, []string{"IP", `"example.org"`}},
		{"frontend port too big", Options{FrontendPort: 70000}, []string{"frontend port", "70000", "1-65535"}},
		{"frontend port negative", Options{FrontendPort: -1}, []string{"frontend port", "-1"}},
		{"UI port below -1", Options{UIPort: -2}, []string{"UI port", "-2", "-1 (no UI)"}},
		{"UI port too big", Options{UIPort: 65536}, []string{"UI port", "65536"}},
		{"UI port equals frontend port", Options{FrontendPort: 7233, UIPort: 7233}, []string{"UI port", "7233", "differ"}},
		{"unknown log level", Options{ServerLogLevel: "loud"}, []string{"server log level", `"loud"`, "debug, info, warn, error"}},
		{"data dir with URI character", Options{DataDir: "/tmp/a?b"}, []string{"data dir", `"/tmp/a?b"`, "'?' or '#'"}},
		{"dynamic config key without dot", Options{DynamicConfig: map[string]any{"transferProcessorMaxPollRPS": 5}}, []string{"dynamic config key", `"transferProcessorMaxPollRPS"`, "dot-separated"}},
		{"dynamic config nil value", Options{DynamicConfig: map[string]any{"history.x": nil}}, []string{"dynamic config key", `"history.x"`, "nil"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := tt.opts.resolve()
			require.Error(t, err)
			assert.Contains(t, err.Error(), "invalid dev server options")
			for _, w := range tt.want {
				assert.Contains(t, err.Error(), w)
			}
		})
	}
}

func TestResolveReportsEveryProblem(t *testing.T) {
	_, err := Options{Namespace: "a b", FrontendPort: -5, UIPort: -7}.resolve()
	require.Error(t, err)
	assert.Contains(t, err.Error(), "namespace")
	assert.Contains(t, err.Error(), "frontend port -5")
	assert.Contains(t, err.Error(), "UI port -7")
}

func TestResolveIP(t *testing.T) {
	tests := []struct {
		in, bind, dial string
	}{
		{"", "127.0.0.1", "127.0.0.1"},
		{"localhost", "127.0.0.1", "127.0.0.1"},
		{"127.0.0.2", "127.0.0.2", "127.0.0.2"},
		{"0.0.0.0", "0.0.0.0", "127.0.0.1"},
		{"::", "::", "127.0.0.1"},
		{"::1", "::1", "::1"},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			bind, dial, err := resolveIP(tt.in)
			require.NoError(t, err)
			assert.Equal(t, tt.bind, bind)
			assert.Equal(t, tt.dial, dial)
		})
	}
}

func TestDynamicConfigOverridesAreCaseInsensitive(t *testing.T) {
	r, err := Options{DynamicConfig: map[string]any{
		"History.TransferProcessorMaxPollRPS": 7,
		"limit.maxIDLength":                   255,
	}}.resolve()
	require.NoError(t, err)
	assert.Equal(t, 7, r.dynamic["history.transferprocessormaxpollrps"], "override replaces the tuned default")
	assert.Equal(t, 255, r.dynamic["limit.maxidlength"], "new keys are added")
	assert.Equal(t, 1000, r.dynamic["history.timerprocessormaxpollrps"], "other defaults stay")

	again, err := Options{}.resolve()
	require.NoError(t, err)
	assert.Equal(t, 1000, again.dynamic["history.transferprocessormaxpollrps"], "overrides never leak into the defaults")
}

func TestDataDirLockIsExclusiveUntilReleased(t *testing.T) {
	path := filepath.Join(t.TempDir(), lockFileName)
	first, err := lockDataDir(path)
	require.NoError(t, err)

	_, err = lockDataDir(path)
	require.ErrorIs(t, err, ErrDataDirInUse)
	assert.Contains(t, err.Error(), path)
	assert.Contains(t, err.Error(), "this process", "the holder is named")

	require.NoError(t, first.unlock())
	require.NoError(t, first.unlock(), "unlock is idempotent")

	second, err := lockDataDir(path)
	require.NoError(t, err, "a released lock can be taken again")
	require.NoError(t, second.unlock())
}

func TestWithMinLevelFiltersAndFollowsChanges(t *testing.T) {
	core, logs := observer.New(zapcore.DebugLevel)
	level := zap.NewAtomicLevelAt(zapcore.WarnLevel)
	log := withMinLevel(zap.New(core), level).With(zap.String("component", "temporal"))

	log.Info("dropped: below warn")
	log.Warn("kept: warn")
	level.SetLevel(zapcore.ErrorLevel)
	log.Warn("dropped: below error after the change")
	log.Error("kept: error")

	var msgs []string
	for _, e := range logs.All() {
		msgs = append(msgs, e.Message)
		assert.Equal(t, "temporal", e.ContextMap()["component"])
	}
	assert.Equal(t, []string{"kept: warn", "kept: error"}, msgs)
}

func TestWithMinLevelKeepsAStricterLogger(t *testing.T) {
	core, logs := observer.New(zapcore.ErrorLevel)
	log := withMinLevel(zap.New(core), zap.NewAtomicLevelAt(zapcore.DebugLevel))
	log.Warn("dropped by the base logger")
	log.Error("kept")
	require.Len(t, logs.All(), 1)
	assert.Equal(t, "kept", logs.All()[0].Message)
}

func TestDataDirLockSurvivesGarbageCollection(t *testing.T) {
	path := filepath.Join(t.TempDir(), lockFileName)
	func() {
		_, err := lockDataDir(path) // the caller drops the lock on purpose
		require.NoError(t, err)
	}()
	runtime.GC()
	runtime.GC()

	_, err := lockDataDir(path)
	require.ErrorIs(t, err, ErrDataDirInUse, "a dropped *dirLock must not be finalized into an unlock")

	heldLocks.Range(func(k, _ any) bool {
		if l := k.(*dirLock); l.f != nil && l.f.Name() == path {
			require.NoError(t, l.unlock())
		}
		return true
	})
	again, err := lockDataDir(path)
	require.NoError(t, err)
	require.NoError(t, again.unlock())
}
