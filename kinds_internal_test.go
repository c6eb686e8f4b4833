package changeset

import (
	"errors"
	"testing"
)

// TestFailureKind_EveryKindHasItsOwnName: every kind of refusal the
// package exports is named in refusalKinds, the one table an Outcome reads,
// with a name of its own.
func TestFailureKind_EveryKindHasItsOwnName(t *testing.T) {
	kinds := []error{ErrNotFound, ErrInvalidToken, ErrExpired, ErrWrongStatus, ErrRunClosed, ErrBusy,
		ErrStateChanged, ErrPlanChanged, ErrWritesDisabled, ErrQuota, ErrRefused, ErrNoChange, ErrDependency}
	names := map[string]error{}
	for _, k := range kinds {
		name := failureKind(refuse(k, "", "refused"))
		if name == "" || name == "error" || name == "ledger" {
			t.Errorf("a refusal of kind %v is named %q in an Outcome", k, name)
		}
		if prev, ok := names[name]; ok {
			t.Errorf("kinds %v and %v are both named %q", prev, k, name)
		}
		names[name] = k
	}
	if len(kinds) != len(refusalKinds) {
		t.Errorf("refusalKinds holds %d kinds, the test knows %d", len(refusalKinds), len(kinds))
	}
	if got := failureKind(Refuse("no")); got != "refused" {
		t.Errorf("failureKind(Refuse) = %q, want refused", got)
	}
	if got := failureKind(errors.New("x")); got != "error" {
		t.Errorf("failureKind(a plain error) = %q, want error", got)
	}
}

// TestStoredErrorKinds_NameTheTypesTheLibraryStores: the table of the
// library's error types is keyed by the names the ledger really stores.
func TestStoredErrorKinds_NameTheTypesTheLibraryStores(t *testing.T) {
	for _, err := range []error{&StateChangedError{}, Refuse("no"), &PanicError{Value: 1}, &WritesDisabledError{},
		&LedgerError{Err: errors.New("x")}, &runUndoFailure{"x"}} {
		if storedErrorKind(storedType(err)) == "" {
			t.Errorf("the stored type %q of %T has no kind", storedType(err), err)
		}
	}
	if storedErrorKind("fs.PathError") != "" {
		t.Errorf("an operation's own error type has a library kind")
	}
}
