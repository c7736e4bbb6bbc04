package devredis

import "syscall"

// childAttrs makes the kernel SIGTERM redis-server when this process dies,
// so a crashed dev stack never leaves a Redis behind holding its port.
func childAttrs() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Pdeathsig: syscall.SIGTERM}
}
