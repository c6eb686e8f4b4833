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
	case "state_changed":
		return "state changed: the resource was not in the state the check expected, so nothing was written"
	case "result_too_large":
		return "result too large: the operation wrote, but its result was over the server's limit"
	case "interrupted":
		return "interrupted: the server stopped while the change was in flight; an operator reconciled it"
	}
	switch errorType {
	case "":
		return ""
	case "changeset.StateChangedError":
		return "state changed: the resource was not in the state the check expected, so nothing was written"
	case "changeset.ChangeError":
		return "refused: the reason was in the answer to the call that failed"
	case "changeset.PanicError":
		return "the operation panicked"
	case "changeset.WritesDisabledError":
		return "writes were disabled on the server"
	case "ledger.Error", "changeset.LedgerError":
		return "the change ledger failed"
	case "RunUndo":
		return "its undo failed during the undo of its run"
	case "Reconciled":
		return "interrupted: reconciled by an operator"
	}
	if strings.HasPrefix(errorType, "changeset.") || strings.HasPrefix(errorType, "ledger.") {
		return "the library refused or failed it"
	}
	return errorType
}
