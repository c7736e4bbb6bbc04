// Package nssetup owns preparing a Temporal namespace for archiveflow
// through the frontend's gRPC API: creating the namespace when it is
// missing and registering the custom search attributes of
// internal/searchattr, both idempotently and retrying while the frontend
// warms up. It does in Go what docker-compose's temporal-setup service does
// with the `temporal operator` CLI; the embedded dev server and the cluster
// suite use it.
package nssetup

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/operatorservice/v1"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/api/workflowservice/v1"
	"go.uber.org/zap"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/archiveflow/archiveflow/internal/searchattr"
)

// ErrSearchAttrConflict marks a search attribute registered with another
// type: retrying cannot fix it.
var ErrSearchAttrConflict = errors.New("search attribute type conflict")

// pollInterval is how often a call the frontend refused is retried.
const pollInterval = 25 * time.Millisecond

// Namespace creates namespace with the given workflow retention unless it
// exists, and returns once the frontend describes it. Transient errors
// (the frontend still warming up) are retried until ctx ends.
func Namespace(ctx context.Context, wf workflowservice.WorkflowServiceClient, namespace string, retention time.Duration, log *zap.Logger) error {
	tick := time.NewTicker(pollInterval)
	defer tick.Stop()
	var lastErr error
	for {
		_, err := wf.DescribeNamespace(ctx, &workflowservice.DescribeNamespaceRequest{Namespace: namespace})
		if err == nil {
			return nil
		}
		lastErr = err
		var notFound *serviceerror.NamespaceNotFound
		if errors.As(serviceError(err), &notFound) {
			_, err = wf.RegisterNamespace(ctx, &workflowservice.RegisterNamespaceRequest{
				Namespace:                        namespace,
				WorkflowExecutionRetentionPeriod: durationpb.New(retention),
			})
			var exists *serviceerror.NamespaceAlreadyExists
			switch {
			case err == nil:
				log.Info("created namespace", zap.String("namespace", namespace), zap.Duration("retention", retention))
			case errors.As(serviceError(err), &exists):
			default:
				lastErr = err
			}
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("create namespace %s: %w (last error: %v)", namespace, ctx.Err(), lastErr)
		case <-tick.C:
		}
	}
}

// serviceError turns a gRPC status error into its Temporal service error
// type (the SDK client does this; a plain gRPC client does not).
func serviceError(err error) error {
	if s, ok := status.FromError(err); ok {
		return serviceerror.FromStatus(s)
	}
	return err
}

// SearchAttributes registers every definition in want that the namespace
// lacks and returns once the frontend lists all of them, so workflows may
// use them immediately. Attributes already registered with the right type
// are left alone, which makes it idempotent on a persistent database. A
// name registered with another type fails at once with
// ErrSearchAttrConflict; transient errors are retried until ctx ends.
func SearchAttributes(ctx context.Context, ops operatorservice.OperatorServiceClient, namespace string, want []searchattr.Definition, log *zap.Logger) error {
	tick := time.NewTicker(pollInterval)
	defer tick.Stop()
	var lastErr error
	for {
		missing, err := missingSearchAttributes(ctx, ops, namespace, want)
		switch {
		case errors.Is(err, ErrSearchAttrConflict):
			return err
		case err == nil && len(missing) == 0:
			return nil
		case err == nil:
			_, err = ops.AddSearchAttributes(ctx, &operatorservice.AddSearchAttributesRequest{
				Namespace:        namespace,
				SearchAttributes: missing,
			})
			if err == nil {
				log.Info("registered search attributes", zap.String("namespace", namespace), zap.Strings("names", sortedNames(missing)))
			}
		}
		if err != nil {
			lastErr = err
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("register search attributes in namespace %s: %w (last error: %v)", namespace, ctx.Err(), lastErr)
		case <-tick.C:
		}
	}
}

// missingSearchAttributes lists the namespace's custom search attributes
// and returns the definitions of want that are not among them.
func missingSearchAttributes(ctx context.Context, ops operatorservice.OperatorServiceClient, namespace string, want []searchattr.Definition) (map[string]enumspb.IndexedValueType, error) {
	resp, err := ops.ListSearchAttributes(ctx, &operatorservice.ListSearchAttributesRequest{Namespace: namespace})
	if err != nil {
		return nil, fmt.Errorf("list search attributes of namespace %s: %w", namespace, err)
	}
	have := resp.GetCustomAttributes()
	missing := make(map[string]enumspb.IndexedValueType)
	for _, d := range want {
		got, ok := have[d.Name]
		switch {
		case !ok:
			missing[d.Name] = d.Type
		case got != d.Type:
			return nil, fmt.Errorf("%w: %s is registered as %s in namespace %s, archiveflow needs %s",
				ErrSearchAttrConflict, d.Name, got, namespace, d.Type)
		}
	}
	return missing, nil
}

func sortedNames(m map[string]enumspb.IndexedValueType) []string {
	names := make([]string, 0, len(m))
	for n := range m {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}
