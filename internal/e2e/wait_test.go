//go:build dev

package e2e

import (
	"context"
	"io"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/archiveflow/archiveflow/internal/ident"
	"github.com/archiveflow/archiveflow/internal/model"
)

// cuttingProxy forwards TCP connections to a target and cuts every one it
// holds on demand: a network (or a server) that drops a long wait.
type cuttingProxy struct {
	ln     net.Listener
	target string
	mu     sync.Mutex
	conns  map[net.Conn]struct{}
	cuts   int
	wg     sync.WaitGroup
}

func startCuttingProxy(t *testing.T, target string) *cuttingProxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	p := &cuttingProxy{ln: ln, target: target, conns: map[net.Conn]struct{}{}}
	p.wg.Add(1)
	go p.serve()
	t.Cleanup(func() {
		_ = ln.Close()
		p.cut()
		p.wg.Wait()
	})
	return p
}

func (p *cuttingProxy) addr() string { return p.ln.Addr().String() }

func (p *cuttingProxy) serve() {
	defer p.wg.Done()
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		p.wg.Add(1)
		go func() {
			defer p.wg.Done()
			p.forward(c)
		}()
	}
}

func (p *cuttingProxy) forward(c net.Conn) {
	up, err := net.Dial("tcp", p.target)
	if err != nil {
		_ = c.Close()
		return
	}
	p.mu.Lock()
	p.conns[c], p.conns[up] = struct{}{}, struct{}{}
	p.mu.Unlock()
	var wg sync.WaitGroup
	wg.Add(2)
	pipe := func(dst, src net.Conn) {
		defer wg.Done()
		_, _ = io.Copy(dst, src)
		_ = dst.Close()
		_ = src.Close()
	}
	go pipe(up, c)
	go pipe(c, up)
	wg.Wait()
	p.mu.Lock()
	delete(p.conns, c)
	delete(p.conns, up)
	p.mu.Unlock()
}

// cut closes every connection the proxy holds and returns how many.
func (p *cuttingProxy) cut() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	n := len(p.conns)
	for c := range p.conns {
		_ = c.Close()
	}
	p.cuts += n
	return n
}

// TestWaitFollowsAJobUntilItIsFinal is issue 30's item 5, run as the user
// does (the starter binary against the stack, a job held by a hook until
// the test lets it go): `submit --wait --wait-timeout` stops waiting with
// exit 6 and says the job keeps running, and `submit --wait` whose
// connections to Temporal are cut while it waits keeps following the job
// and reports it FINISHED, exit 0: a running job is never reported failed.
func TestWaitFollowsAJobUntilItIsFinal(t *testing.T) {
	root := t.TempDir()
	gate := filepath.Join(t.TempDir(), "open")
	writeHook(t, root, "held", "on_Snapshot__10_held.sh", `while [ ! -e '`+gate+`' ]; do sleep 0.1; done
echo '{"type":"ArchiveResult","status":"succeeded","output_str":"let go"}'
`)
	s := NewStack(t, server, root, nil)
	s.StartPools(t, os.Environ())
	bin := BuildCommand(t, "github.com/archiveflow/archiveflow/starter")

	// --wait-timeout: exit 6, the job still running.
	first := "http://127.0.0.1:1/held-first"
	res := runStarter(t, bin, s, "submit", first, "--wait", "--wait-timeout", "2s")
	assert.Equal(t, 6, res.code, "%s\n%s", res.stdout, res.stderr)
	assert.Contains(t, res.stderr, "stopped waiting (--wait-timeout 2s passed); the jobs keep running: follow them with starter status IDENT")
	assert.NotContains(t, res.stdout+res.stderr, "FAILED")
	firstID, _, err := ident.FromURL(first)
	require.NoError(t, err)
	res = runStarter(t, bin, s, "status", firstID)
	require.Equal(t, 0, res.code, res.stderr)
	assert.Contains(t, res.stdout, "state:    active", "the job kept running")

	res = runStarter(t, bin, s, "submit", "--wait-timeout", "-1s", "--wait", first)
	assert.Equal(t, 2, res.code)
	assert.Contains(t, res.stderr, "--wait-timeout -1s: must be 0 (wait until the jobs end) or more")

	// --wait through a proxy that cuts the connections while it waits.
	proxy := startCuttingProxy(t, s.Config.Temporal.HostPort)
	second := "http://127.0.0.1:1/held-second"
	secondID, _, err := ident.FromURL(second)
	require.NoError(t, err)
	cmd := starterCommand(t, bin, s, "submit", second, "--wait")
	cmd.Env = append(cmd.Env, "ARCHIVEFLOW_TEMPORAL_HOST_PORT="+proxy.addr())
	var stdout, stderr strings.Builder
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	require.NoError(t, cmd.Start())
	waited := make(chan error, 1)
	ended := make(chan struct{})
	go func() {
		err := cmd.Wait()
		close(ended)
		waited <- err
	}()
	t.Cleanup(func() {
		select {
		case <-ended:
		default:
			_ = cmd.Process.Kill()
			<-ended
		}
	})

	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	require.Eventually(t, func() bool {
		v, err := s.Store.GetJob(ctx, secondID)
		return err == nil && v.State == model.StateActive
	}, time.Minute, 50*time.Millisecond, "the second job starts")
	// Cut the waiting starter's connections three times, each once it has
	// connected again.
	for i := 0; i < 3; i++ {
		require.Eventually(t, func() bool { return proxy.cut() > 0 }, 30*time.Second, 50*time.Millisecond, "cut %d", i+1)
	}
	require.NoError(t, os.WriteFile(gate, nil, 0o644))

	var runErr error
	select {
	case runErr = <-waited:
	case <-ctx.Done():
		t.Fatalf("submit --wait did not end: %s\n%s", stdout.String(), stderr.String())
	}
	res = starterExit(t, cmd, runErr, &stdout, &stderr)
	assert.Equal(t, 0, res.code, "%s\n%s", res.stdout, res.stderr)
	assert.Contains(t, res.stdout, secondID+"  FINISHED  "+second)
	assert.GreaterOrEqual(t, proxy.cuts, 3)

	// The first job, let go too, finishes.
	require.Eventually(t, func() bool {
		v, err := s.Store.GetJob(ctx, firstID)
		return err == nil && v.State == model.StateFinished
	}, time.Minute, 50*time.Millisecond)
}
