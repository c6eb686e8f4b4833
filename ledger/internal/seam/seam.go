// Package seam joins package ledger to package ledger/driver without an
// import cycle.
//
// Package driver imports package ledger, because a backend's methods take
// and return ledger's rows (ledger.Change, ledger.Run, …). Package ledger
// therefore cannot import driver, yet ledger.Open must find the backends
// that driver.Register recorded, and driver.NewLedger and driver.BackendOf
// must reach a Ledger's unexported insides. Both packages import this one
// instead, which imports neither: its values are typed loosely (any), and
// each end asserts the one concrete type the other end stores.
//
// Nothing outside packages ledger and ledger/driver may use it.
package seam

import "sync"

var (
	openersMu sync.RWMutex
	openers   = map[string]any{}
)

// Register records open, a func(context.Context, string, ledger.OpenOptions)
// (any, error) that package driver builds around a driver.Opener, for
// targets of the given scheme. It reports false, recording nothing, when
// the scheme already has one.
func Register(scheme string, open any) bool {
	openersMu.Lock()
	defer openersMu.Unlock()
	if _, dup := openers[scheme]; dup {
		return false
	}
	openers[scheme] = open
	return true
}

// Opener returns what Register recorded for scheme, or nil.
func Opener(scheme string) any {
	openersMu.RLock()
	defer openersMu.RUnlock()
	return openers[scheme]
}

// Package ledger sets these in its init, before any code of package driver
// (which imports ledger) can run.
var (
	// NewLedger wraps a driver.Backend in a new *ledger.Ledger.
	NewLedger func(backend any) any
	// BackendOf returns the driver.Backend under a *ledger.Ledger.
	BackendOf func(ledger any) any
)
