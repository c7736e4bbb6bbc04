package main

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/archiveflow/archiveflow/internal/hostbudget"
)

func TestSetHostLimits(t *testing.T) {
	c, err := parseSettingsChange([]string{"host:Example.com=concurrency:1,delay:2s", "host:b.example=default", "concurrency=3"})
	require.NoError(t, err)
	require.Equal(t, []hostChange{
		{host: "example.com", limits: &hostbudget.Limits{Concurrency: 1, Delay: 2 * time.Second}},
		{host: "b.example"},
	}, c.hosts)
	require.True(t, c.settings(), "other keys still change the job's settings")

	for _, bad := range []string{
		"host:example.com=delay:2s",           // no concurrency
		"host:example.com=concurrency:0",      // out of range
		"host:example.com=concurrency:x",      // not a number
		"host:example.com:8080=concurrency:1", // a port
		"host:=concurrency:1",
		"host:example.com=speed:9",
	} {
		_, err := parseSettingsChange([]string{bad})
		require.Error(t, err, bad)
		require.Contains(t, err.Error(), "host:", bad)
	}
}
