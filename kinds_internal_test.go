package changeset

import (
	"errors"
	"testing"

	"github.com/mcp-changeset/changeset-go/internal/pipeline"
)

// TestFailureKind_EveryKindHasItsOwnName: every kind of refusal the
// package exports is named in refusalKinds, the one table an Outcome reads,
// with a name of its own.
func TestFailureKind_EveryKindHasItsOwnName(t *testing.T) {
	kinds := []error{ErrNotFound, ErrInvalidToken, ErrExpired, ErrWrongStatus, ErrRunClosed, ErrBusy,
		ErrStateChanged, ErrPlanChanged, ErrWritesDisabled, ErrQuota, ErrRefused, ErrNoChange, ErrDependency,
		ErrAwaitingApproval, ErrDeclined}
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
		&LedgerError{Err: errors.New("x")}} {
		if storedErrorKind(pipeHost{}.Failed("chg_1", "apply", err).Type) == "" {
			t.Errorf("the stored type of %T has no kind", err)
		}
	}
	if storedErrorKind(pipeline.RunUndoType) == "" {
		t.Errorf("the stored type of a run undo's failure has no kind")
	}
	if storedErrorKind("fs.PathError") != "" {
		t.Errorf("an operation's own error type has a library kind")
	}
}

// TestKindError_EveryPipelineKindHasItsOwnSentinel: every kind of refusal
// the change pipeline asks for is made with a sentinel of its own, and
// NoKind with none, so that errors.Is reads a refusal of the pipeline as
// it reads one of the root package.
func TestKindError_EveryPipelineKindHasItsOwnSentinel(t *testing.T) {
	if kindError(pipeline.NoKind) != nil {
		t.Errorf("NoKind has the sentinel %v", kindError(pipeline.NoKind))
	}
	seen := map[error]pipeline.Kind{}
	for k := pipeline.NoKind + 1; k < pipeline.Kinds; k++ {
		err := kindError(k)
		if err == nil {
			t.Errorf("pipeline kind %d has no sentinel", k)
			continue
		}
		if prev, ok := seen[err]; ok {
			t.Errorf("pipeline kinds %d and %d are both %v", prev, k, err)
		}
		seen[err] = k
		if h := (pipeHost{}); !h.Is(h.ChangeError(k, "", "refused", nil), k) {
			t.Errorf("a refusal of pipeline kind %d does not match %v", k, err)
		}
	}
	if len(seen) != len(refusalKinds) {
		t.Errorf("the pipeline names %d kinds, refusalKinds holds %d", len(seen), len(refusalKinds))
	}
}
