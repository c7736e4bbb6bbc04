// Package egresstest owns the proof tests give that a fetch never reached
// an address: a loopback listener that counts every connection made to it
// (a denied port's "server log").
package egresstest

import (
	"net"
	"strconv"
	"sync/atomic"
	"testing"
)

// Guarded is a loopback port nothing may connect to.
type Guarded struct {
	// Addr is IP:PORT (127.0.0.1:PORT for Guard).
	Addr     string
	accepted atomic.Int32
}

// Guard listens on a free loopback port until tb ends, accepting and
// closing every connection and counting it.
func Guard(tb testing.TB) *Guarded { return GuardAt(tb, "127.0.0.1") }

// GuardAt is Guard on a free port of ip, another loopback address (e.g.
// 127.0.0.5: all of 127.0.0.0/8 is this machine's), standing for an
// address a rule denies as a whole (a metadata endpoint).
func GuardAt(tb testing.TB, ip string) *Guarded {
	tb.Helper()
	ln, err := net.Listen("tcp", net.JoinHostPort(ip, "0"))
	if err != nil {
		tb.Fatalf("egresstest: listen: %v", err)
	}
	g := &Guarded{Addr: ln.Addr().String()}
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			g.accepted.Add(1)
			_ = c.Close()
		}
	}()
	tb.Cleanup(func() { _ = ln.Close() })
	return g
}

// Port is the guarded port.
func (g *Guarded) Port() int {
	_, port, _ := net.SplitHostPort(g.Addr)
	n, _ := strconv.Atoi(port)
	return n
}

// Connections is how many connections were made to the port so far.
func (g *Guarded) Connections() int { return int(g.accepted.Load()) }
