package devserver

import (
	"bufio"
	"context"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	enumspb "go.temporal.io/api/enums/v1"
	"go.uber.org/zap"
)

// helperDirEnv makes TestHelperServerProcess run a server on that dir.
const helperDirEnv = "ARCHIVEFLOW_DEVSERVER_HELPER_DIR"

// TestHelperServerProcess is not a test: TestKilledServerProcessReleasesDataDir
// runs it in a child process that starts a server on a data dir, finishes
// one workflow, reports "READY", and then waits to be killed.
func TestHelperServerProcess(t *testing.T) {
	dir := os.Getenv(helperDirEnv)
	if dir == "" {
		t.Skip("helper for TestKilledServerProcessReleasesDataDir")
	}
	s, err := Start(context.Background(), Options{DataDir: dir, UIPort: NoUI, Log: zap.NewNop()})
	require.NoError(t, err)
	c := newClient(t, s)
	startWorker(t, c, "devserver-crash")
	runGreeting(t, c, "devserver-crash", "crash-ident")
	_, _ = os.Stdout.WriteString("READY\n")
	select {} // killed by the parent
}

func TestKilledServerProcessReleasesDataDir(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a child process")
	}
	dir := t.TempDir()
	cmd := exec.Command(os.Args[0], "-test.run=^TestHelperServerProcess$", "-test.count=1")
	cmd.Env = append(os.Environ(), helperDirEnv+"="+dir)
	stdout, err := cmd.StdoutPipe()
	require.NoError(t, err)
	cmd.Stderr = os.Stderr
	require.NoError(t, cmd.Start())
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })

	ready := make(chan bool, 1)
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			if strings.Contains(sc.Text(), "READY") {
				ready <- true
				return
			}
		}
		ready <- false // child exited without becoming ready
	}()
	select {
	case ok := <-ready:
		require.True(t, ok, "child server process exited before it was ready")
	case <-time.After(startTimeout):
		t.Fatal("child server process not ready in time")
	}

	ctx, cancel := context.WithTimeout(context.Background(), startTimeout)
	defer cancel()
	_, err = Start(ctx, Options{DataDir: dir, UIPort: NoUI, Log: testLogger(t)})
	require.ErrorIs(t, err, ErrDataDirInUse, "the child holds the data dir")
	assert.Contains(t, err.Error(), "pid "+strconv.Itoa(cmd.Process.Pid))

	require.NoError(t, cmd.Process.Kill()) // SIGKILL: no clean shutdown
	_ = cmd.Wait()

	s := startServer(t, Options{DataDir: dir, UIPort: NoUI})
	c := dial(t, s)
	desc, err := c.DescribeWorkflowExecution(context.Background(), "crash-ident", "")
	require.NoError(t, err, "the workflow finished before the kill is in the database")
	assert.Equal(t, enumspb.WORKFLOW_EXECUTION_STATUS_COMPLETED, desc.GetWorkflowExecutionInfo().GetStatus())
	runWorker(t, c, "devserver-crash")
	runGreeting(t, c, "devserver-crash", "after-crash")
}
