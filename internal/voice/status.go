package voice

import "strings"

// FailureError is the error get_change_status shows for a failed change.
// failure is the ledger's kind of failure (state_changed, error,
// result_too_large, interrupted) and errorType the Go type name of the
// error the ledger recorded. A failure the library decided (a refused
// state check, a result too large, an interrupted change, a refusal, a
// panic, the ledger's own failure, a failed undo inside a run's undo) is
// said in words, never as one of the library's Go identifiers; an
// operation's own error is its type name only, so that its text (which may
// hold paths or credentials) stays in the ledger for operators.
func (v *Voice) FailureError(failure, errorType string) string {
	switch failure {
	case "state_changed", "result_too_large", "interrupted":
		return FailureKind(failure)
	}
	kind, ok := map[string]string{
		"changeset.StateChangedError":   "state_changed",
		"changeset.ChangeError":         "refused",
		"changeset.PanicError":          "panic",
		"changeset.WritesDisabledError": "writes_disabled",
		"ledger.Error":                  "ledger",
		"changeset.LedgerError":         "ledger",
		"RunUndo":                       "run_undo",
		"Reconciled":                    "interrupted",
	}[errorType]
	switch {
	case errorType == "":
		return ""
	case ok:
		return FailureKind(kind)
	case strings.HasPrefix(errorType, "changeset.") || strings.HasPrefix(errorType, "ledger."):
		return "the library refused or failed it"
	}
	return errorType
}
