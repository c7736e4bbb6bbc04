package activities

import (
	"reflect"
	"testing"

	"github.com/stretchr/testify/assert"
)

// TestActivityNamesAreUniquePerWorker: activity type names are method
// names, and the structs a worker registers together (internal/pools
// newPoolWorkers: the pool's shared queue, the host's queue) must not
// share one, or the worker panics at start ("already registered").
func TestActivityNamesAreUniquePerWorker(t *testing.T) {
	for queue, structs := range map[string][]any{
		"shared": {&PoolActivities{}, &CrawlActivities{}, &PurgeActivities{}},
		"host":   {&HostActivities{}, &CrawlHostActivities{}},
	} {
		owner := map[string]string{}
		for _, s := range structs {
			typ := reflect.TypeOf(s)
			for i := range typ.NumMethod() {
				name := typ.Method(i).Name
				if other, ok := owner[name]; ok {
					assert.Fail(t, "activity name registered twice", "%s queue: %s is a method of %s and %s", queue, name, other, typ.Elem().Name())
				}
				owner[name] = typ.Elem().Name()
			}
		}
	}
}
