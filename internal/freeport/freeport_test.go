package freeport

import (
	"net"
	"strconv"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestFreePortsAreDistinctAndBindable(t *testing.T) {
	ports, err := Ports("127.0.0.1", 8)
	require.NoError(t, err)
	require.Len(t, ports, 8)
	seen := map[int]bool{}
	for _, p := range ports {
		assert.False(t, seen[p], "port %d returned twice", p)
		seen[p] = true
		l, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(p)))
		require.NoError(t, err, "port %d must be bindable", p)
		require.NoError(t, l.Close())
	}
}

func TestFreePortsHonoursExclusions(t *testing.T) {
	first, err := Port("127.0.0.1")
	require.NoError(t, err)
	ports, err := Ports("127.0.0.1", 4, first)
	require.NoError(t, err)
	assert.NotContains(t, ports, first)
}

func TestCheckPortFreeNamesTheTakenPort(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer func() { _ = l.Close() }()
	port := l.Addr().(*net.TCPAddr).Port

	err = CheckFree("web UI", "127.0.0.1", port)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "web UI port "+strconv.Itoa(port))
	assert.Contains(t, err.Error(), "not available")
}

func TestPortInStaysInRangeAndIsBindable(t *testing.T) {
	for range 20 {
		p, err := PortIn("127.0.0.1", 20000, 20100)
		require.NoError(t, err)
		assert.GreaterOrEqual(t, p, 20000)
		assert.LessOrEqual(t, p, 20100)
	}
	_, err := PortIn("127.0.0.1", 30000, 20000)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "range 30000-20000")
}
