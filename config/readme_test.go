package config

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestReadmeExampleLoads keeps the README's configuration example valid.
func TestReadmeExampleLoads(t *testing.T) {
	readme, err := os.ReadFile("../README.md")
	require.NoError(t, err)
	_, rest, ok := strings.Cut(string(readme), "```yaml\n")
	require.True(t, ok, "README.md has a ```yaml example")
	example, _, ok := strings.Cut(rest, "```")
	require.True(t, ok)
	dir := inTempDir(t)
	file := writeFile(t, filepath.Join(dir, "example.yaml"), example)
	cfg, err := Load(Options{File: file})
	require.NoError(t, err)
	require.Equal(t, 5, cfg.Retry.PolicyFor("wget").MaximumAttempts)
}
