package main

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/archiveflow/archiveflow/internal/model"
)

func TestSubmitLimitFlags(t *testing.T) {
	s, err := parseSubmitArgs([]string{"https://example.com/", "--depth", "inf", "--max-pages", "100", "--max-bytes", "2MiB", "--max-duration", "90m"})
	require.NoError(t, err)
	assert.Equal(t, int64(100), s.settings.MaxPages)
	assert.Equal(t, int64(2<<20), s.settings.MaxBytes)
	assert.Equal(t, 90*time.Minute, s.settings.MaxDuration)

	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"https://example.com/", "--max-pages", "10"}, "limits are for crawls"},
		{[]string{"https://example.com/", "--depth", "inf", "--max-pages", "-1"}, "--max-pages -1: must be a number of pages >= 0"},
		{[]string{"https://example.com/", "--depth", "inf", "--max-bytes", "5M"}, "--max-bytes 5M"},
		{[]string{"https://example.com/", "--depth", "inf", "--max-duration", "1500ms"}, "whole seconds"},
	} {
		_, err := parseSubmitArgs(tc.args)
		require.ErrorContains(t, err, tc.want, "%q", tc.args)
		assert.Equal(t, exitUsage, exitCode(err), "%q", tc.args)
	}
}

func TestSetLimitKeys(t *testing.T) {
	c, err := parseSettingsChange([]string{"max_pages=500", "max_bytes=1GB", "max_duration=2h"})
	require.NoError(t, err)
	require.True(t, c.settings())
	got := c.apply(model.Settings{Concurrency: 2, MaxPages: 100})
	assert.Equal(t, model.Settings{Concurrency: 2, MaxPages: 500, MaxBytes: 1_000_000_000, MaxDuration: 2 * time.Hour}, got)
	assert.Equal(t, "500 pages, 953.7 MiB, 2h0m0s", limitsLine(got))

	c, err = parseSettingsChange([]string{"max_pages=0"})
	require.NoError(t, err)
	assert.Zero(t, c.apply(model.Settings{MaxPages: 100}).MaxPages, "0 lifts the limit")

	_, err = parseSettingsChange([]string{"max_pages=x", "max_duration=-1s", "max_bytes=lots"})
	require.Error(t, err)
	for _, want := range []string{"max_pages=x", "max_duration=-1s", "max_bytes=lots"} {
		assert.ErrorContains(t, err, want)
	}
}
