package nssetup_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/operatorservice/v1"
	"go.temporal.io/api/workflowservice/v1"
	"go.uber.org/zap/zaptest"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/archiveflow/archiveflow/internal/devserver"
	"github.com/archiveflow/archiveflow/internal/nssetup"
	"github.com/archiveflow/archiveflow/internal/searchattr"
)

// frontend starts an in-memory dev server and returns a connection to it.
func frontend(t *testing.T) (*devserver.Server, *grpc.ClientConn) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	srv, err := devserver.Start(ctx, devserver.Options{UIPort: devserver.NoUI})
	require.NoError(t, err)
	t.Cleanup(func() { assert.NoError(t, srv.Stop()) })
	conn, err := grpc.NewClient(srv.HostPort(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	require.NoError(t, err)
	t.Cleanup(func() { _ = conn.Close() })
	return srv, conn
}

func TestNamespaceCreatesOnceAndIsIdempotent(t *testing.T) {
	_, conn := frontend(t)
	wf := workflowservice.NewWorkflowServiceClient(conn)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()

	require.NoError(t, nssetup.Namespace(ctx, wf, "archiveflow-nssetup", 72*time.Hour, zaptest.NewLogger(t)))
	d, err := wf.DescribeNamespace(ctx, &workflowservice.DescribeNamespaceRequest{Namespace: "archiveflow-nssetup"})
	require.NoError(t, err)
	assert.Equal(t, 72*time.Hour, d.GetConfig().GetWorkflowExecutionRetentionTtl().AsDuration())

	require.NoError(t, nssetup.Namespace(ctx, wf, "archiveflow-nssetup", time.Hour, zaptest.NewLogger(t)), "idempotent")
	d, err = wf.DescribeNamespace(ctx, &workflowservice.DescribeNamespaceRequest{Namespace: "archiveflow-nssetup"})
	require.NoError(t, err)
	assert.Equal(t, 72*time.Hour, d.GetConfig().GetWorkflowExecutionRetentionTtl().AsDuration(), "an existing namespace is left alone")
}

func TestSearchAttributesAddsMissingAndRejectsConflicts(t *testing.T) {
	srv, conn := frontend(t)
	ops := operatorservice.NewOperatorServiceClient(conn)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	list := func() map[string]enumspb.IndexedValueType {
		resp, err := ops.ListSearchAttributes(ctx, &operatorservice.ListSearchAttributesRequest{Namespace: srv.Namespace()})
		require.NoError(t, err)
		return resp.GetCustomAttributes()
	}

	extra := append([]searchattr.Definition{{Name: "ArchiveflowTestExtra", Type: enumspb.INDEXED_VALUE_TYPE_KEYWORD}}, searchattr.All...)
	require.NoError(t, nssetup.SearchAttributes(ctx, ops, srv.Namespace(), extra, zaptest.NewLogger(t)))
	assert.Equal(t, enumspb.INDEXED_VALUE_TYPE_KEYWORD, list()["ArchiveflowTestExtra"])

	require.NoError(t, nssetup.SearchAttributes(ctx, ops, srv.Namespace(), extra, zaptest.NewLogger(t)), "idempotent")

	conflict := []searchattr.Definition{{Name: searchattr.NameStep, Type: enumspb.INDEXED_VALUE_TYPE_KEYWORD}}
	err := nssetup.SearchAttributes(ctx, ops, srv.Namespace(), conflict, zaptest.NewLogger(t))
	require.Error(t, err)
	assert.True(t, errors.Is(err, nssetup.ErrSearchAttrConflict), err)
	assert.Contains(t, err.Error(), searchattr.NameStep)
	assert.NoError(t, ctx.Err(), "a conflict fails at once instead of retrying until the deadline")
}
