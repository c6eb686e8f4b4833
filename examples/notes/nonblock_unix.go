//go:build unix

package main

import (
	"errors"
	"fmt"
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

// lockNotes takes the lock file of the notes directory for a
// compare-and-swap, so that two processes serving one directory cannot
// both pass the check of one note and both write it. The lock file is
// opened as a note is (no blocking on a FIFO swapped in, regular files
// only) and locked with flock, which the kernel releases if the process
// dies.
func (s *store) lockNotes() (unlock func(), err error) {
	f, err := s.root.OpenFile(lockFile, os.O_RDWR|os.O_CREATE|syscall.O_NONBLOCK|syscall.O_NOFOLLOW, 0o600)
	if err != nil {
		return nil, fmt.Errorf("open the notes' lock file: %w", err)
	}
	if fi, err := f.Stat(); err != nil || !fi.Mode().IsRegular() {
		f.Close()
		return nil, fmt.Errorf("the notes' lock file %s is not a regular file", lockFile)
	}
	rc, err := f.SyscallConn()
	if err != nil {
		f.Close()
		return nil, err
	}
	var ferr error
	if err := rc.Control(func(fd uintptr) { ferr = syscall.Flock(int(fd), syscall.LOCK_EX) }); err != nil || ferr != nil {
		f.Close()
		return nil, fmt.Errorf("lock the notes: %w", errors.Join(err, ferr))
	}
	return func() { f.Close() }, nil // closing the last descriptor releases the lock
}
