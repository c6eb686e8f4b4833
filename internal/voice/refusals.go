package voice

import (
	"fmt"
	"time"
	"unicode/utf8"
)

// The refusals and failures of a change's preview, apply and undo. Each
// says what happened, what was (not) done, and what the agent can do
// next. IDs and values from the caller go through ID, Quote or Value.

// Change names a change: "change chg_…".
func Change(id string) string { return "change " + shortID(id) }

// Run names a run: "run run_…".
func Run(id string) string { return "run " + shortID(id) }

// shortID is ID with a caller's malformed ID cut short, so that whatever
// the caller sent is not echoed at length.
func shortID(id string) string {
	if !looksLikeID(id) && len(id) > 40 {
		return Quote(id[:40] + "…")
	}
	return ID(id)
}

// ChangeNotFound refuses an unknown change, or one of another scope.
func ChangeNotFound(id string) string { return Change(id) + " not found" }

// WritesOff refuses a write while writes are off. subject is what was not
// done ("change chg_… was not applied"), or "" for writes in general;
// unknownMode is the value of the write-mode variable when it is not a
// write mode.
func (v *Voice) WritesOff(subject, unknownMode string) string {
	s := "writes are off on this server"
	if subject != "" {
		s = subject + ": " + s
	}
	if unknownMode != "" {
		s += ": " + v.env + " holds " + Quote(unknownMode) + ", which is not a write mode (the valid values are guarded and disabled)"
	}
	return s + "; nothing was written and the token was not spent; writes stay off until " + v.turnOn()
}

// NotDone is the subject of a refusal: "change chg_… was not applied".
func NotDone(id, verb string) string { return Change(id) + " was not " + verb }

// StateChanged refuses an apply (phase "apply") or an undo whose resource
// is no longer as the check expected.
func StateChanged(id, phase string) string {
	if phase == "undo" {
		return NotDone(id, "undone") + ": the resource changed after the change was applied, and undoing would overwrite that later edit; nothing was written"
	}
	return NotDone(id, "applied") + ": the resource changed after the preview; nothing was written (preview again to see the current state)"
}

// LedgerFailed says the ledger failed, by the kind of its failure.
func LedgerFailed(kind string) string {
	return "the change ledger failed: " + kind + " (an operator can find details in the server log)"
}

// InvalidToken refuses a token that is malformed or does not match.
func InvalidToken(token, id string) string {
	return "invalid " + token + " for " + Change(id) + "; nothing was spent"
}

// ClaimedElsewhere refuses a claim that lost a race.
func ClaimedElsewhere(id string) string {
	return Change(id) + " was claimed by another request at the same moment"
}

// PayloadAltered refuses a change whose stored payload no longer matches
// its hash.
func PayloadAltered(id string) string {
	return Change(id) + " was refused: its stored payload does not match the payload that was previewed (the ledger was altered outside the library); nothing was applied and no token was spent. An operator should check the ledger"
}

// ClockBehind refuses a claim on a server whose clock reads before the
// change was made.
func ClockBehind(id string, skew time.Duration) string {
	return fmt.Sprintf("%s was refused: this server's clock reads more than %v before the change was created; fix the clock", Change(id), skew)
}

// PreviewExpired refuses the apply of an expired preview.
func PreviewExpired(id, at string) string {
	return Change(id) + " expired at " + at + "; preview it again"
}

// NoUndo refuses the undo of a change whose operation has no inverse.
func NoUndo(id string) string { return Change(id) + " cannot be undone: its operation has no undo" }

// UndoWindowClosed refuses an undo after its window.
func UndoWindowClosed(id, at string) string {
	return Change(id) + " cannot be undone: its undo window closed at " + at
}

// RunNotOpenForApply refuses the apply of a change whose run is being or
// was undone.
func RunNotOpenForApply(id, runID, status string) string {
	return Change(id) + " cannot be applied: its " + Run(runID) + " is " + status
}

// WrongStatus refuses a change in a status that does not allow the step.
// Its text is part of the contract: "change <id> cannot be applied
// (status: <status>)".
func WrongStatus(id, verb, status string) string {
	return Change(id) + " cannot be " + verb + " (status: " + status + ")"
}

// RunClosed refuses to add a change to a run that is being or was undone.
func (v *Voice) RunClosed(runID, status string) string {
	return Run(runID) + " cannot take new changes (status: " + status + "); start a new run with " + v.Tool("start_run")
}

// ProposalTooLarge refuses a proposal over the size limit.
func ProposalTooLarge(action string, size, limit int) string {
	return fmt.Sprintf("the proposal for %s is %d bytes of canonical JSON, over the limit of %d; nothing was stored", action, size, limit)
}

// PendingQuota refuses a preview when too many wait for an apply.
func PendingQuota(n int) string {
	return fmt.Sprintf("%d previews are already waiting for an apply, the limit of this server; nothing was stored. Apply the previews you have or let them expire before making more", n)
}

// EmptyDiff refuses a preview that would change nothing.
func EmptyDiff(action string) string {
	return "nothing would change: the preview of " + action + " found no difference from the current state; nothing was stored and there is nothing to apply"
}

// ArgsNotObject refuses preview arguments that are not a JSON object.
func ArgsNotObject() string { return "the arguments must be a JSON object" }

// RunIDNotString refuses a run_id that is not a string.
func RunIDNotString() string { return "run_id must be a string" }

// InvalidArgs refuses arguments that do not fit the operation's input;
// problem is from DecodeProblem.
func InvalidArgs(action, problem string) string {
	return "invalid arguments for " + action + ": " + problem
}

// ArgsRefused refuses a call whose arguments are not strictly valid JSON
// text. problem is the library's own description of what is wrong.
func ArgsRefused(tool, problem string) string {
	return "the arguments of " + tool + " were refused: " + problem + "; nothing was done"
}

// PreviewFailed says a preview failed; what names the failure (see
// Reference).
func PreviewFailed(action, what string) string {
	return "the preview of " + action + " failed: " + what
}

// Reference names a failure whose details only the server's log holds:
// kind is the library's words for it, or typeName the Go type name of an
// operation's own error.
func Reference(kind, typeName, ref string) string {
	if kind != "" {
		return kind + "; reference " + ref
	}
	return typeName + " (reference " + ref + "; the server's log has the details)"
}

// CallerUnknown refuses a call whose caller could not be identified.
func CallerUnknown() string { return "the caller could not be identified; nothing was done" }

// ScopeUnknown refuses a call whose scope could not be determined.
func ScopeUnknown() string { return "the caller's scope could not be determined; nothing was done" }

// SessionLabel is the label of the run a session's previews join.
// client is the client's name from its initialize request, or "".
func SessionLabel(client, at string) string {
	if client == "" {
		return "session of an unnamed client, started " + at
	}
	if len(client) > 80 { // the label keeps to 200 bytes, escapes and all
		cut := 80
		for cut > 0 && !utf8.RuneStart(client[cut]) {
			cut--
		}
		client = client[:cut] + "…"
	}
	return "session of " + Quote(client) + ", started " + at
}

// The refusals of a proposal the library cannot store. They reach the
// agent, but mostly tell an operation's author what to fix.

// ProposalUnstorable: a part of the proposal (what) has no faithful JSON
// form; why is the encoder's reason.
func ProposalUnstorable(what, why string) string {
	return "the proposal's " + what + " cannot be stored: " + Quote(why)
}

// BadDiffKind: a diff entry has a kind that is not one of the three.
func BadDiffKind(field, kind string) string {
	return "the proposal's diff entry " + Quote(field) + " has kind " + Quote(kind) + "; want added, removed or changed"
}

// ProposalBadUTF8: a text of the proposal is not valid UTF-8.
func ProposalBadUTF8() string {
	return "the proposal cannot be stored: its summary, resource, warnings or dependencies hold invalid UTF-8"
}

// TooManyDependsOn: a proposal depends on too many resources.
func TooManyDependsOn(n, limit int) string {
	return fmt.Sprintf("the proposal names %d resources it depends on, over the limit of %d", n, limit)
}

// DependsOnSize: a resource the proposal depends on is empty or too long.
func DependsOnSize(limit int) string {
	return fmt.Sprintf("a resource the proposal depends on must be 1 to %d bytes", limit)
}

// TooManyResources: a change names too many resources.
func TooManyResources(n, limit int) string {
	return fmt.Sprintf("the change names %d resources, over the limit of %d; split it into smaller changes", n, limit)
}

// ResourceSize: a resource the proposal names is empty, too long or not
// valid UTF-8.
func ResourceSize(limit int) string {
	return fmt.Sprintf("a resource the proposal names must be 1 to %d bytes of valid UTF-8", limit)
}
