//go:build !unix

package kv

// lock does nothing where flock is missing: there, only one process may
// write a JSONFile (the JSONFile's own mutex orders its goroutines).
func lock(path string) (unlock func(), err error) { return func() {}, nil }
