package model

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

// Statuses 404, 503, 0 (no response), 600 and a failed fetcher code are
// errors (error_count: 4xx and 5xx, as ArchiveBot's layout defines it); a
// 404 is also a warning, as ArchiveBot's pipeline marks it. Bytes add up.
func TestCountResponses(t *testing.T) {
	rs := []Response{
		{Status: 101}, {Status: 200}, {Status: 204, WgetCode: "RETRFINISHED"}, {Status: 301},
		{Status: 404, Bytes: 7}, {Status: 503}, {Status: 0}, {Status: 99}, {Status: 600}, {Status: 200, WgetCode: "SERVER_ERROR", Bytes: 5},
	}
	c := CountResponses(rs)
	assert.Equal(t, ResponseCounts{Count: 10, R1xx: 1, R2xx: 3, R3xx: 1, R4xx: 1, R5xx: 1, Runk: 3, Errors: 5, Bytes: 12}, c)
	assert.Equal(t, int64(4), c.Downloaded(), "items_downloaded: the 2xx and 3xx")
	assert.Equal(t, "OK", Response{Status: 200}.FetcherCode())
	assert.Equal(t, "NETWORK_ERROR", Response{}.FetcherCode())
	assert.True(t, Response{Status: 404}.IsWarning())
	assert.True(t, Response{Status: 404}.IsError())
	assert.False(t, Response{Status: 304}.IsError())
}

// A 5xx, 408 or 429 is the site unable to answer now; every other answer,
// redirects and other 4xx included, is the page's own.
func TestTransientStatus(t *testing.T) {
	for status, want := range map[int]bool{
		200: false, 301: false, 304: false, 400: false, 403: false, 404: false, 410: false,
		408: true, 429: true, 500: true, 502: true, 503: true, 599: true, 600: false, 999: false,
	} {
		assert.Equal(t, want, TransientStatus(status), "HTTP %d", status)
	}
}
