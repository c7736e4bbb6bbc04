package devserver

import (
	"context"
	"fmt"
	"net"
	"strconv"
)

// freePort returns a TCP port on host that nothing listens on.
//
// Asking the kernel for port 0 and closing the listener leaves a window in
// which another process may be handed the same port. To make that
// unlikely, the port is also connected to once and the accepted side is
// closed first: the port then sits in TIME_WAIT, which keeps the kernel
// from giving it out as an ephemeral port for a while, while our own later
// listen (Go sets SO_REUSEADDR) may still bind it.
func freePort(host string) (int, error) {
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

// freePorts returns n distinct free ports on host, none of them in exclude.
func freePorts(host string, n int, exclude ...int) ([]int, error) {
	ports := make([]int, 0, n)
	seen := make(map[int]bool, n+len(exclude))
	for _, p := range exclude {
		seen[p] = true
	}
	for attempt := 0; len(ports) < n; attempt++ {
		if attempt >= 10*n {
			return nil, fmt.Errorf("pick %d free ports on %s: the kernel keeps returning ports already taken", n, host)
		}
		p, err := freePort(host)
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

// checkPortFree fails with a clear error when host:port cannot be bound
// right now, so a fixed port that is taken is reported instead of
// failing deep inside a server.
func checkPortFree(what, host string, port int) error {
	addr := net.JoinHostPort(host, strconv.Itoa(port))
	l, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("%s port %d on %s is not available: %w", what, port, host, err)
	}
	return l.Close()
}
