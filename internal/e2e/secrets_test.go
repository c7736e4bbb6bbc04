//go:build dev

package e2e

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/hex"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"math/big"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	commonpb "go.temporal.io/api/common/v1"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/client"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/reflect/protoreflect"

	"github.com/archiveflow/archiveflow/internal/backend"
	"github.com/archiveflow/archiveflow/internal/tclient"
	"github.com/archiveflow/archiveflow/internal/testredis"
	"github.com/archiveflow/archiveflow/workflows"
)

// syncBuffer is a log sink tests can read while loggers write.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) Sync() error { return nil }

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

func randomHex(t *testing.T) string {
	t.Helper()
	b := make([]byte, 8)
	_, err := rand.Read(b)
	require.NoError(t, err)
	return hex.EncodeToString(b)
}

// writeClientCert writes a self-signed client certificate and its key,
// named with tag, and returns their paths.
func writeClientCert(t *testing.T, tag string) (certFile, keyFile string) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	require.NoError(t, err)
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "archiveflow-e2e"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour)}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	require.NoError(t, err)
	keyDER, err := x509.MarshalECPrivateKey(key)
	require.NoError(t, err)
	dir := t.TempDir()
	certFile = filepath.Join(dir, "client-"+tag+".crt")
	keyFile = filepath.Join(dir, "client-"+tag+".key")
	require.NoError(t, os.WriteFile(certFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600))
	require.NoError(t, os.WriteFile(keyFile, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER}), 0o600))
	return certFile, keyFile
}

// payloadStrings walks a protobuf message and calls fn with the decoded
// text of every Payload in it: JSON payloads as every string (and object
// key) they hold, others as their raw data.
func payloadStrings(m protoreflect.Message, fn func(string)) {
	if p, ok := m.Interface().(*commonpb.Payload); ok {
		fn(string(p.GetData()))
		if string(p.GetMetadata()["encoding"]) == "json/plain" {
			var v any
			if json.Unmarshal(p.GetData(), &v) == nil {
				jsonStrings(v, fn)
			}
		}
		return
	}
	m.Range(func(fd protoreflect.FieldDescriptor, v protoreflect.Value) bool {
		switch {
		case fd.IsList() && fd.Message() != nil:
			for i := 0; i < v.List().Len(); i++ {
				payloadStrings(v.List().Get(i).Message(), fn)
			}
		case fd.IsMap() && fd.MapValue().Message() != nil:
			v.Map().Range(func(_ protoreflect.MapKey, mv protoreflect.Value) bool {
				payloadStrings(mv.Message(), fn)
				return true
			})
		case fd.Message() != nil && !fd.IsList() && !fd.IsMap():
			payloadStrings(v.Message(), fn)
		}
		return true
	})
}

func jsonStrings(v any, fn func(string)) {
	switch x := v.(type) {
	case string:
		fn(x)
	case []any:
		for _, e := range x {
			jsonStrings(e, fn)
		}
	case map[string]any:
		for k, e := range x {
			fn(k)
			jsonStrings(e, fn)
		}
	}
}

// historyText renders a workflow's whole history, and that of every child
// workflow it started, as text: every event as protojson and every
// payload decoded.
func historyText(t *testing.T, c client.Client, workflowID, runID string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var b strings.Builder
	var children []*commonpb.WorkflowExecution
	it := c.GetWorkflowHistory(ctx, workflowID, runID, false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	events := 0
	for it.HasNext() {
		ev, err := it.Next()
		require.NoError(t, err)
		events++
		js, err := protojson.Marshal(ev)
		require.NoError(t, err)
		b.Write(js)
		b.WriteByte('\n')
		payloadStrings(ev.ProtoReflect(), func(s string) { b.WriteString(s); b.WriteByte('\n') })
		if a := ev.GetChildWorkflowExecutionStartedEventAttributes(); a != nil {
			children = append(children, a.GetWorkflowExecution())
		}
	}
	require.NotZero(t, events, "workflow %s has a history", workflowID)
	for _, ch := range children {
		b.WriteString(historyText(t, c, ch.GetWorkflowId(), ch.GetRunId()))
	}
	return b.String()
}

// TestSecretsNeverLeaveTheWorker runs a full job with every kind of
// secret configured: a Redis password on a redis-server that requires it,
// a Temporal API key, a TLS private key path. The hooks include the
// shipped plugins, one that asks for every secret in its config.json and
// one that prints whatever its environment holds. Afterwards the job's
// whole Temporal history (children included, every payload decoded),
// every Redis key and value, and every log line of the workers hold none
// of the secrets.
func TestSecretsNeverLeaveTheWorker(t *testing.T) {
	tag := randomHex(t)
	redisPassword := "redis-pw-" + tag
	apiKey := "temporal-api-key-" + tag
	certFile, keyFile := writeClientCert(t, tag)

	rs := testredis.Start(t)
	if !rs.Real() {
		t.Skip("needs a real redis-server (requirepass)")
	}
	require.NoError(t, rs.Client().ConfigSet(context.Background(), "requirepass", redisPassword).Err())

	site := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html")
		fmt.Fprint(w, `<!DOCTYPE html><html><head><title>Secrets test</title></head><body><a href="/next">next</a></body></html>`)
	}))
	defer site.Close()

	plugins := builtinPlugins(t, "headers", "wget", "title", "outlinks", "hashes", "index")
	writeHook(t, plugins, "greedy", "on_Snapshot__30_greedy.sh", `echo "greedy sees: $REDIS_URL $TEMPORAL_KEY $KEY_FILE $ARCHIVEFLOW_REDIS_URL" >&2
printf '{"type":"ArchiveResult","status":"succeeded","output_str":"%s %s"}\n' "$REDIS_URL" "$TEMPORAL_KEY"
`)
	require.NoError(t, os.WriteFile(filepath.Join(plugins, "greedy", "config.json"), []byte(`{"properties": {
  "REDIS_URL": {"type": "string", "default": "", "x-aliases": ["ARCHIVEFLOW_REDIS_URL"]},
  "TEMPORAL_KEY": {"type": "string", "default": "", "x-aliases": ["ARCHIVEFLOW_TEMPORAL_API_KEY"]},
  "KEY_FILE": {"type": "string", "default": "", "x-aliases": ["ARCHIVEFLOW_TEMPORAL_TLS_KEY_FILE"]}
}}`), 0o644))
	writeHook(t, plugins, "nosy", "on_Snapshot__31_nosy.sh", `env >&2
found=$(env | grep -i -e redis -e temporal -e key -e archiveflow | tr '\n' ' ' | tr -d '"\\')
printf '{"type":"ArchiveResult","status":"succeeded","output_str":"%s"}\n' "$found"
`)

	var logs syncBuffer
	enc := zap.NewProductionEncoderConfig()
	log := zap.New(zapcore.NewCore(zapcore.NewJSONEncoder(enc), &logs, zapcore.DebugLevel))

	cfg := TestConfig(t, server, "redis://:"+redisPassword+"@"+rs.Addr+"/0", plugins)
	cfg.Temporal.APIKey = apiKey
	cfg.Temporal.TLS.CertFile, cfg.Temporal.TLS.KeyFile = certFile, keyFile
	cfg.Hooks.PassEnv = append(cfg.Hooks.PassEnv, "ARCHIVEFLOW_*")
	require.NoError(t, cfg.Validate())
	secrets := map[string]string{"redis password": redisPassword, "temporal api key": apiKey, "tls key path": keyFile,
		"redis url": cfg.Redis.URL}
	for name, v := range secrets {
		require.Contains(t, cfg.Secrets().Values(), v, name)
	}

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	rdb, store, err := backend.OpenRedis(ctx, cfg, log)
	require.NoError(t, err)
	t.Cleanup(func() { _ = rdb.Close() })
	// The client is built from the configuration (API key, key pair
	// loaded from the key file); the dev server speaks plaintext, so only
	// the TLS layer is dropped: the key still travels in every request.
	opts, err := tclient.Options(cfg.Temporal, log)
	require.NoError(t, err)
	require.NotNil(t, opts.ConnectionOptions.TLS, "the key pair was loaded")
	opts.ConnectionOptions.TLS, opts.ConnectionOptions.TLSDisabled = nil, true
	tc, err := client.DialContext(ctx, opts)
	require.NoError(t, err)
	t.Cleanup(tc.Close)

	s := &Stack{Config: cfg, Client: tc, Redis: rdb, Store: store, Server: server, RedisURL: cfg.Redis.URL, Log: log}
	// The worker gets its secrets through the environment too, as in
	// production (and a copy under another name).
	env := append(builtinEnv(t),
		"ARCHIVEFLOW_REDIS_URL="+cfg.Redis.URL, "ARCHIVEFLOW_TEMPORAL_API_KEY="+apiKey,
		"ARCHIVEFLOW_TEMPORAL_TLS_KEY_FILE="+keyFile, "ARCHIVEFLOW_TEMPORAL_TLS_CERT_FILE="+certFile)
	s.StartPools(t, env)

	job := s.Submit(t, site.URL+"/", nil)
	require.NoError(t, s.Wait(t, job, 3*time.Minute))
	var st workflows.Status
	require.NoError(t, job.Run.Get(context.Background(), &st))
	res := resultsByHook(st)
	for _, p := range []string{"headers", "wget", "title", "hashes", "index", "greedy", "nosy"} {
		assert.Equal(t, "succeeded", string(res[p].Status), "%s: %s", p, res[p].Error)
	}
	history := historyText(t, tc, job.Ident, job.Run.GetRunID())
	dump := testredis.Dump(t, rdb, "*")
	require.Contains(t, dump, job.Ident+"_log", "the job log is in Redis")
	require.Contains(t, dump, "greedy sees:", "the hooks' stderr reached the job log")

	for name, secret := range secrets {
		assert.NotContains(t, history, secret, "%s in the Temporal history", name)
		assert.NotContains(t, dump, secret, "%s in Redis", name)
		assert.NotContains(t, logs.String(), secret, "%s in the workers' logs", name)
	}
	if t.Failed() {
		t.Logf("logs:\n%s", logs.String())
	}
}
