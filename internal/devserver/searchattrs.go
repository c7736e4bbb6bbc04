package devserver

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/operatorservice/v1"
	"go.uber.org/zap"

	"github.com/archiveflow/archiveflow/internal/searchattr"
)

// errSearchAttrConflict marks a search attribute registered with another
// type: retrying cannot fix it.
var errSearchAttrConflict = errors.New("search attribute type conflict")

// ensureSearchAttributes registers every definition in want that the
// namespace lacks and returns once the frontend lists all of them, so
// workflows may use them immediately. Attributes already registered with
// the right type are left alone, which makes it idempotent on a
// persistent database. Transient errors (the frontend still warming up)
// are retried until ctx ends.
func ensureSearchAttributes(ctx context.Context, ops operatorservice.OperatorServiceClient, namespace string, want []searchattr.Definition, log *zap.Logger) error {
	tick := time.NewTicker(25 * time.Millisecond)
	defer tick.Stop()
	var lastErr error
	for {
		missing, err := missingSearchAttributes(ctx, ops, namespace, want)
		switch {
		case errors.Is(err, errSearchAttrConflict):
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
				errSearchAttrConflict, d.Name, got, namespace, d.Type)
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
