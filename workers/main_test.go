package main

import (
	"bytes"
	"context"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
)

// A configured plugins root that does not exist stops the worker before it
// connects anywhere: exit 2, the key and the path named.
func TestMissingPluginsRootRefusesToStart(t *testing.T) {
	missing := filepath.Join(t.TempDir(), "plugins")
	t.Setenv("ARCHIVEFLOW_ARCHIVE_DIR", t.TempDir())
	var stderr bytes.Buffer
	code := run(context.Background(), []string{"--plugins-dir", missing, "--temporal-address", "127.0.0.1:1"}, &stderr)
	assert.Equal(t, 2, code)
	assert.Contains(t, stderr.String(), "plugins.dirs[0] = "+missing)
	assert.Contains(t, stderr.String(), "does not exist")
}
