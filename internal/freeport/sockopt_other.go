//go:build !unix

package freeport

import "syscall"

// setReuseAddr is a no-op where SO_REUSEADDR has other semantics (Windows).
func setReuseAddr(_, _ string, _ syscall.RawConn) error { return nil }
