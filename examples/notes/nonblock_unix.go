//go:build unix

package main

import (
	"os"
	"syscall"
)

// clearNonblock puts a file opened with O_NONBLOCK back into blocking
// mode. (File.Fd would not: it only undoes what the os package did
// itself.) It is for regular files, which the runtime's poller does not
// manage, so changing the mode under it is safe.
func clearNonblock(f *os.File) error {
	rc, err := f.SyscallConn()
	if err != nil {
		return err
	}
	var serr error
	if err := rc.Control(func(fd uintptr) { serr = syscall.SetNonblock(int(fd), false) }); err != nil {
		return err
	}
	return serr
}
