//go:build !dev

package main

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestDevWithoutTagExplainsHowToRunIt(t *testing.T) {
	res := runCLI(t, "", "dev", "https://example.com/")
	assert.Equal(t, exitUsage, res.code)
	assert.Contains(t, res.stderr, "go run -tags dev ./starter dev")
}
