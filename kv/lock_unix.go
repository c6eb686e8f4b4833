//go:build unix

package kv

import (
	"errors"
	"fmt"
	"os"
	"syscall"
)

// lock takes an exclusive flock on the file at path, creating it if need
// be. The kernel releases it when the returned unlock closes the file, or
// when the process dies.
func lock(path string) (unlock func(), err error) {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|syscall.O_NOFOLLOW, 0o644)
	if err != nil {
		return nil, fmt.Errorf("kv: open the lock file: %w", err)
	}
	rc, err := f.SyscallConn()
	if err != nil {
		f.Close()
		return nil, err
	}
	var ferr error
	if err := rc.Control(func(fd uintptr) { ferr = syscall.Flock(int(fd), syscall.LOCK_EX) }); err != nil || ferr != nil {
		f.Close()
		return nil, fmt.Errorf("kv: lock %s: %w", path, errors.Join(err, ferr))
	}
	return func() { f.Close() }, nil
}
