//go:build !unix

package devserver

import "fmt"

type dirLock struct{}

// lockDataDir is not implemented on this platform: persistent data dirs
// need flock to guard against two servers sharing one database.
func lockDataDir(path string) (*dirLock, error) {
	return nil, fmt.Errorf("lock %s: persistent data dirs are only supported on unix", path)
}

func (*dirLock) unlock() error { return nil }
