package voice

import "strings"

// FailureError is the error get_change_status shows for a failed change.
// failure is the ledger's kind of failure (state_changed, error,
// result_too_large, interrupted), errorType the Go type name of the error
// the ledger recorded, and kind the FailureKind the library gives that
// type when it is one of its own ("" otherwise; the library's one table of
// its error types decides). A failure the library decided (a refused
// state check, a result too large, an interrupted change, a refusal, a
// panic, the ledger's own failure, a failed undo inside a run's undo) is
// said in words, never as one of the library's Go identifiers; an
// operation's own error is its type name only, so that its text (which may
// hold paths or credentials) stays in the ledger for operators.
func (v *Voice) FailureError(failure, errorType, kind string) string {
	switch failure {
	case "state_changed", "result_too_large", "interrupted":
		return FailureKind(failure)
	}
	switch {
	case errorType == "":
		return ""
	case FailureKind(kind) != "":
		return FailureKind(kind)
	case strings.HasPrefix(errorType, "changeset.") || strings.HasPrefix(errorType, "ledger."):
		return "the library refused or failed it"
	}
	return errorType
}
