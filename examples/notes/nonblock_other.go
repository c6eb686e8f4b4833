//go:build !unix

package main

import "os"

// clearNonblock does nothing where O_NONBLOCK does not apply to files.
func clearNonblock(f *os.File) error { return nil }
