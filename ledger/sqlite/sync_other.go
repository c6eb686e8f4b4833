//go:build !linux

package sqlite

import (
	"os"
	"runtime"
)

// openLog opens the write-ahead log to sync it, for writing: Windows
// flushes only a handle that may write.
func openLog(path string) (*os.File, error) { return os.OpenFile(path, os.O_RDWR, 0) }

// datasync flushes f (fsync; FlushFileBuffers on Windows).
func datasync(f *os.File) error { return f.Sync() }

// syncDirs: a new file's directory entry is durable only once its
// directory is synced, except on Windows, which cannot sync a directory
// (NTFS journals its metadata).
const syncDirs = runtime.GOOS != "windows"
