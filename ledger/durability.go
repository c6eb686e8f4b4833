package ledger

import (
	"context"
	"fmt"
)

// Durability says which commits of a ledger wait for the disk before they
// return ([OpenOptions].Durability). docs/reliability.md says what each
// risks.
//
// A claim is the commit that moves a change or a run into the statuses
// where its operation has run or may be running: pending → applying or
// applied, applied → undoing or undone, a run open → undoing. At-most-once
// rests on it: a claim that returned is never lost, so no token can be
// spent twice. The other commits (a preview, an apply's or an undo's
// outcome, a failure, a run's report) only record; losing the latest of
// them leaves a preview to redo, or a change or run in flight for an
// operator to reconcile, never a second write.
//
// Durability implements flag.Value, so that a command can take it as a
// flag:
//
//	flag.Var(&opts.Durability, "durability", "full or claims")
type Durability int

const (
	// DurabilityFull, the default, makes every commit wait until it is on
	// the disk (SQLite: synchronous=FULL; PostgreSQL: the server's
	// synchronous_commit).
	DurabilityFull Durability = iota
	// DurabilityClaims makes claims wait until they are on the disk, and
	// lets the commits of lazy transactions ([Ledger.WithLazyTx]) return
	// once the database has them, in the operating system's memory: each
	// reaches the disk with the next claim (or checkpoint) after it, of
	// any process, since the write-ahead log is written in order. A crash
	// of the process loses nothing; a crash of the machine (power loss,
	// kernel panic) may lose the lazy commits made since the last claim.
	// SQLite commits them with synchronous=NORMAL, and the claims of one
	// process share their syncs of the log (group commit); PostgreSQL
	// commits them with synchronous_commit=off.
	DurabilityClaims
)

// String returns the name a flag takes: "full" or "claims".
func (d Durability) String() string {
	switch d {
	case DurabilityFull:
		return "full"
	case DurabilityClaims:
		return "claims"
	}
	return fmt.Sprintf("Durability(%d)", int(d))
}

// Set sets d from its name, "full" or "claims" (flag.Value).
func (d *Durability) Set(name string) error {
	switch name {
	case "full":
		*d = DurabilityFull
	case "claims":
		*d = DurabilityClaims
	default:
		return fmt.Errorf("unknown durability %q: use full (every commit waits for the disk) or claims (only claims do)", name)
	}
	return nil
}

// check refuses a Durability that is neither constant.
func (d Durability) check() error {
	if d != DurabilityFull && d != DurabilityClaims {
		return fmt.Errorf("OpenOptions.Durability is %d: use DurabilityFull or DurabilityClaims", int(d))
	}
	return nil
}

// WithLazyTx is [Ledger.WithTx] for a transaction that claims nothing: a
// preview, an outcome, a failure, a run's report. Under
// [DurabilityClaims] its commit returns without waiting for the disk and
// reaches it with the next claim; under [DurabilityFull] it is WithTx.
//
// A claim inside it (see [Durability]) is refused with an error wrapping
// ErrTransition, whatever the durability, so that a claim is never
// committed lazily: claim in WithTx.
func (l *Ledger) WithLazyTx(ctx context.Context, fn func(tx *Tx) error) error {
	return l.retry(ctx, l.beginLazy, fn)
}

// beginLazy starts a lazy transaction.
func (l *Ledger) beginLazy(ctx context.Context) (*Tx, error) {
	return l.begin(ctx, true)
}

// claims reports whether a change moving from from ("" for a new row) to
// to is a claim: it enters a status in which its operation has run or
// may be running, from one in which it had not.
func claims(from, to Status) bool {
	switch to {
	case Applying, Undoing:
		return from != to
	case Applied:
		return from != Applying && from != Applied
	case Undone:
		return from != Undoing && from != Undone
	}
	return false
}

// claimsRun reports whether a run moving from from ("" for a new run) to
// to is a claim of the run.
func claimsRun(from, to RunStatus) bool { return to == RunUndoing && from != RunUndoing }

// lazyClaimError is the refusal of a claim inside a lazy transaction.
func lazyClaimError(kind, id, from, to string) error {
	if from == "" {
		from = `""`
	}
	return &Error{Op: "update " + kind + " " + id, Err: fmt.Errorf("%w: %s → %s is a claim, which a lazy transaction (WithLazyTx) may not make: claim in WithTx", ErrTransition, from, to)}
}
