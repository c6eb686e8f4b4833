package voice

import "fmt"

// The failures of an apply or undo that ran. A failure the library itself
// decided reads as its kind in words; an operation's own error as its Go
// type name only, whose full text stays in the ledger for operators.

// The kinds of failure of a change the library decides, as the ledger
// names them (ledger.Failure), in words.
var failureWords = map[string]string{
	"state_changed":    "state changed: the resource was not in the state the check expected, so nothing was written",
	"result_too_large": "result too large: the operation wrote, but its result was over the server's limit, so there is no undo",
	"interrupted":      "interrupted: the server stopped while the change was in flight; an operator reconciled it",
	"panic":            "the operation's code crashed (panicked)",
	"refused":          "refused: the reason was in the answer to the call that failed",
	"run_undo":         "its undo failed during the undo of its run",
	"writes_disabled":  "writes were disabled on the server",
	"ledger":           "the change ledger failed",
}

// FailureKind is a failure the library decided, in words: kind is a
// failure of the ledger (state_changed, result_too_large, interrupted) or
// one of panic, refused, run_undo, writes_disabled and ledger. It returns
// "" for any other kind.
func FailureKind(kind string) string { return failureWords[kind] }

// DependencyHeld refuses an undo that would remove what a kept change
// depends on; reason is the library's own.
func DependencyHeld(id, reason string) string {
	return NotDone(id, "undone") + ": " + reason + ". Nothing was written and the undo token was not spent"
}

// NotRecorded says a step happened but the ledger could not record it.
func NotRecorded(id, verb, cause, status string, apply bool) string {
	s := fmt.Sprintf("%s was %s, but the ledger could not record it (%s); it stays '%s' for an operator to reconcile", Change(id), verb, cause, status)
	if apply {
		s += ", and no undo token was issued"
	}
	return s
}

// ResultUnstorable: the apply happened but its result has no JSON form.
func ResultUnstorable(id string) string {
	return Change(id) + " was applied, but its result cannot be stored as JSON; it has no undo"
}

// ResultTooLarge: the apply happened but its result is over the limit.
func ResultTooLarge(id string, size, limit int) string {
	return fmt.Sprintf("%s was applied, but its result of %d bytes is over the limit of %d; it has no undo", Change(id), size, limit)
}

// Failed prefixes an operation's own refusal with what was not done.
func Failed(id, verb, msg string) string { return NotDone(id, verb) + ": " + msg }

// OperationFailed says the operation failed with an error of its own,
// named by its Go type name.
func OperationFailed(id, verb, typeName string) string {
	return NotDone(id, verb) + ": the operation failed with " + typeName + " (details are in the ledger for operators)"
}

// FailedAs says the step failed in a way the library decided; kind is
// from FailureKind.
func FailedAs(id, verb, kind string) string {
	return NotDone(id, verb) + ": " + kind + " (details are in the ledger for operators)"
}

// OperationGone: the server no longer has the operation of a change.
func OperationGone(id, action string) string {
	return Change(id) + " failed: this server no longer has the operation " + Quote(action) + " (or its undo)"
}
