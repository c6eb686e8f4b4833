//go:build !unix

package main

import "os"

// clearNonblock does nothing where O_NONBLOCK does not apply to files.
func clearNonblock(f *os.File) error { return nil }

// lockNotes has no lock file where flock is missing: two processes must
// not serve one directory there.
func (s *store) lockNotes() (unlock func(), err error) { return func() {}, nil }
