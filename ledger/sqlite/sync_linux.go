package sqlite

import (
	"os"
	"syscall"
)

// openLog opens the write-ahead log to sync it.
func openLog(path string) (*os.File, error) { return os.Open(path) }

// datasync flushes f's data and the metadata needed to read it back
// (fdatasync, as SQLite syncs the log).
func datasync(f *os.File) error {
	for {
		err := syscall.Fdatasync(int(f.Fd()))
		if err != syscall.EINTR {
			return err
		}
	}
}

// syncDirs: a new file's directory entry is durable only once its
// directory is synced.
const syncDirs = true
