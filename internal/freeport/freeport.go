// Package freeport owns picking TCP ports for servers that tests and the
// embedded stack start on loopback: a port nothing listens on (kept out of
// the kernel's ephemeral range for a while, so another process is
// unlikely to be handed it before our server binds it), several distinct
// ones, and a clear error when a fixed port is taken.
package freeport

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net"
	"strconv"
)

// Port returns a TCP port on host that nothing listens on.
//
// Asking the kernel for port 0 and closing the listener leaves a window in
// which another process may be handed the same port. To make that
// unlikely, the port is also connected to once and the accepted side is
// closed first: the port then sits in TIME_WAIT, which keeps the kernel
// from giving it out as an ephemeral port for a while, while our own later
// listen (Go sets SO_REUSEADDR) may still bind it.
func Port(host string) (int, error) {
	lc := net.ListenConfig{Control: setReuseAddr}
	l, err := lc.Listen(context.Background(), "tcp", net.JoinHostPort(host, "0"))
	if err != nil {
		return 0, fmt.Errorf("pick free port on %s: %w", host, err)
	}
	defer func() { _ = l.Close() }()
	addr := l.Addr().(*net.TCPAddr)

	client, err := net.DialTCP("tcp", nil, addr)
	if err != nil {
		return 0, fmt.Errorf("pick free port on %s: connect to %s: %w", host, addr, err)
	}
	defer func() { _ = client.Close() }()
	server, err := l.Accept()
	if err != nil {
		return 0, fmt.Errorf("pick free port on %s: accept on %s: %w", host, addr, err)
	}
	_ = server.Close() // server side closes first: TIME_WAIT stays on this port
	return addr.Port, nil
}

// Ports returns n distinct free ports on host, none of them in exclude.
func Ports(host string, n int, exclude ...int) ([]int, error) {
	ports := make([]int, 0, n)
	seen := make(map[int]bool, n+len(exclude))
	for _, p := range exclude {
		seen[p] = true
	}
	for attempt := 0; len(ports) < n; attempt++ {
		if attempt >= 10*n {
			return nil, fmt.Errorf("pick %d free ports on %s: the kernel keeps returning ports already taken", n, host)
		}
		p, err := Port(host)
		if err != nil {
			return nil, err
		}
		if !seen[p] {
			seen[p] = true
			ports = append(ports, p)
		}
	}
	return ports, nil
}

// CheckFree fails with a clear error when host:port cannot be bound
// right now, so a fixed port that is taken is reported instead of
// failing deep inside a server.
func CheckFree(what, host string, port int) error {
	addr := net.JoinHostPort(host, strconv.Itoa(port))
	l, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("%s port %d on %s is not available: %w", what, port, host, err)
	}
	return l.Close()
}

// PortIn returns a port in [lo, hi] on host that can be bound right now,
// for servers that cannot take any port: Temporal stores its membership
// ports in a PostgreSQL smallint, so they must stay below 32768, which
// also keeps them out of Linux's ephemeral range (a port there may be
// handed to any outgoing connection).
func PortIn(host string, lo, hi int) (int, error) {
	if lo < 1 || hi > 65535 || lo > hi {
		return 0, fmt.Errorf("pick free port on %s: range %d-%d: must be within 1-65535, low to high", host, lo, hi)
	}
	for range 100 {
		p := lo + rand.IntN(hi-lo+1)
		if CheckFree("", host, p) == nil {
			return p, nil
		}
	}
	return 0, fmt.Errorf("pick free port on %s: 100 random ports in %d-%d were all taken", host, lo, hi)
}
