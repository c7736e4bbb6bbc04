//go:build !linux

package devredis

import "syscall"

// childAttrs: no parent-death signal outside Linux; Stop must be called.
func childAttrs() *syscall.SysProcAttr { return nil }
