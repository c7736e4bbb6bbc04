package model

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

// Statuses 503, 0 (no response), 600 and a failed fetcher code are errors.
func TestCountResponses(t *testing.T) {
	rs := []Response{
		{Status: 101}, {Status: 200}, {Status: 204, WgetCode: "RETRFINISHED"}, {Status: 301},
		{Status: 404}, {Status: 503}, {Status: 0}, {Status: 99}, {Status: 600}, {Status: 200, WgetCode: "SERVER_ERROR"},
	}
	c := CountResponses(rs)
	assert.Equal(t, ResponseCounts{Count: 10, R1xx: 1, R2xx: 3, R3xx: 1, R4xx: 1, R5xx: 1, Runk: 3, Errors: 4}, c)
	assert.Equal(t, "OK", Response{Status: 200}.FetcherCode())
	assert.Equal(t, "NETWORK_ERROR", Response{}.FetcherCode())
	assert.True(t, Response{Status: 404}.IsWarning())
	assert.False(t, Response{Status: 404}.IsError())
}
