package ledger

import (
	"fmt"
	"time"
)

// ChangeFilter selects changes for [Ledger.Changes], [Ledger.CountChanges]
// and [Ledger.TallyChanges] (and their twins on [Tx]). Zero fields do not
// filter.
type ChangeFilter struct {
	Statuses      []Status
	RunID         string
	ScopeHash     Digest
	UpdatedBefore time.Time // updated strictly before this instant
	// UpdatedSince selects changes updated at or after this instant
	// (mcp-changeset list --since, the dashboard's since filter).
	UpdatedSince time.Time
	// Action selects the changes of one operation, e.g. "set_setting".
	Action string
	// Text selects changes whose summary, action or resource contains it,
	// ignoring the case of ASCII letters. It is matched literally (% and
	// _ are not wildcards) and at most MaxFilterText bytes long.
	//
	// A text of MinIndexedText characters or more is found through an
	// index of trigrams, however many changes the ledger holds. A shorter
	// one has no trigram to look up: it is matched only against the
	// ShortTextWindow newest changes (by creation time, with any created
	// in the same microsecond as the last of them), so that a search for
	// one or two characters costs the same on any ledger; older changes
	// that contain it are not found, nor counted by CountChanges.
	Text string
	// ExpiresAfter selects changes whose confirmation token expires
	// strictly after this instant (pending previews still usable).
	ExpiresAfter time.Time
	// DependsOn selects changes whose DependsOn lists this resource.
	DependsOn string
	// DependsOnAny selects changes whose DependsOn lists any of these
	// resources (at most MaxDependsOnAny; a run's undo asks once for all
	// the resources it would remove).
	DependsOnAny []string
	// By selects changes that this actor previewed, applied or undid
	// (PreviewedBy, AppliedBy or UndoneBy equal to it).
	By string
	// Before selects changes that come after this key in the list's
	// order (newest first): created earlier, or at the same microsecond
	// with a smaller ID. It is how callers page through a list.
	Before *ChangeKey
	Limit  int // at most this many; 0 means all
}

// Tally is how many changes of one action are in one status, and when the
// newest of them was last updated: what a summary of a run needs, without
// its rows.
type Tally struct {
	Action  string
	Status  Status
	N       int
	Updated time.Time
}

// MaxDependsOnAny bounds ChangeFilter.DependsOnAny: the ledger's reads
// refuse more, so that one statement's parameters stay within every
// backend's limits.
const MaxDependsOnAny = 500

// MaxFilterText bounds ChangeFilter.Text: the ledger's reads refuse a
// longer search rather than send it to the database.
const MaxFilterText = 200

// MinIndexedText is the shortest ChangeFilter.Text, in characters
// (Unicode code points), that the ledger searches through its index of
// trigrams, and so over every change.
const MinIndexedText = 3

// ShortTextWindow is how many of the newest changes a ChangeFilter.Text
// shorter than MinIndexedText is matched against.
const ShortTextWindow = 5000

// ChangeKey is a change's place in a list, newest first: its creation time
// and ID. A page's last key starts the next page (ChangeFilter.Before).
type ChangeKey struct {
	CreatedAt time.Time
	ID        string
}

// RunFilter selects runs for [Ledger.Runs] and [Tx.Runs]. Zero fields do
// not filter.
type RunFilter struct {
	Statuses   []RunStatus
	ScopeHash  Digest
	Kind       RunKind
	SessionKey Digest
	// StartedBy selects the runs this actor started (Run.StartedBy):
	// "agent:ana" lists the runs of ana's agent.
	StartedBy     string
	UpdatedBefore time.Time // updated strictly before this instant
	UpdatedSince  time.Time // updated at or after this instant
	// Before selects runs that come after this key in the list's order
	// (newest first), as ChangeFilter.Before does for changes: a page's
	// last run (its CreatedAt and ID) starts the next page.
	Before *ChangeKey
	Limit  int
}

// check refuses a filter over the bounds a statement's parameters keep to.
func (f ChangeFilter) check() error {
	if len(f.DependsOnAny) > MaxDependsOnAny {
		return fmt.Errorf("ledger: %d resources in DependsOnAny; at most %d are allowed", len(f.DependsOnAny), MaxDependsOnAny)
	}
	if len(f.Text) > MaxFilterText {
		return fmt.Errorf("ledger: the search text is %d bytes; at most %d are allowed", len(f.Text), MaxFilterText)
	}
	return nil
}
