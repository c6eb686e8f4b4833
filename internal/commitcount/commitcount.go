// Package commitcount counts, for benchmarks, the SQLite transactions of
// this process that commit a write. In WAL mode with synchronous=FULL each
// of them appends to the write-ahead log and syncs it, so their number is
// what a workload costs the disk.
//
// Counting rides on hooks of modernc.org/sqlite: a connection hook
// registers, on every connection opened while counting is enabled, a
// pre-update hook (a row is about to change), a commit hook and a rollback
// hook. A commit is counted when a row changed since the last commit or
// rollback on that connection, so a write transaction that wrote nothing (a
// refused claim) is not counted. Writes that fire no pre-update hook, such
// as PRAGMA user_version, are not counted either; the ledger makes them
// only when it creates or upgrades a file.
//
// The hooks cost a little CPU on every row written, so measure time on
// connections opened with counting disabled.
package commitcount

import (
	"sync"
	"sync/atomic"

	sqlite "modernc.org/sqlite"
)

var (
	once    sync.Once
	enabled atomic.Bool
	commits atomic.Int64
)

// Enable makes every SQLite connection opened from now on count its
// commits, until Disable. Connections opened before keep whatever they had.
func Enable() {
	once.Do(func() { sqlite.RegisterConnectionHook(hook) })
	enabled.Store(true)
}

// Disable stops hooking connections opened from now on. Connections opened
// while counting was enabled go on counting.
func Disable() { enabled.Store(false) }

// Commits returns the number of committed write transactions counted so
// far.
func Commits() int64 { return commits.Load() }

func hook(conn sqlite.ExecQuerierContext, _ string) error {
	if !enabled.Load() {
		return nil
	}
	h, ok := conn.(sqlite.HookRegisterer)
	if !ok {
		return nil
	}
	// A connection runs one statement at a time, but database/sql may hand
	// it to another goroutine between statements; an atomic keeps the race
	// detector content.
	var dirty atomic.Bool
	h.RegisterPreUpdateHook(func(sqlite.SQLitePreUpdateData) { dirty.Store(true) })
	h.RegisterCommitHook(func() int32 {
		if dirty.Swap(false) {
			commits.Add(1)
		}
		return 0 // 0 lets the commit proceed
	})
	h.RegisterRollbackHook(func() { dirty.Store(false) })
	return nil
}
