//go:build unix

package freeport

import "syscall"

// setReuseAddr sets SO_REUSEADDR so a port in TIME_WAIT can be bound again.
func setReuseAddr(_, _ string, c syscall.RawConn) error {
	var sockErr error
	err := c.Control(func(fd uintptr) {
		sockErr = syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_REUSEADDR, 1)
	})
	if err != nil {
		return err
	}
	return sockErr
}
