package changeset

import (
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strings"

	"github.com/mcp-changeset/changeset-go/internal/pipeline"
	"github.com/mcp-changeset/changeset-go/internal/voice"
	"github.com/mcp-changeset/changeset-go/ledger"
)

// ChangeError is a refusal or failure meant for the agent: its message
// reaches the agent unchanged as a tool error. Return one from a Preview to
// refuse a proposal ("unknown setting \"colour\"") and from Apply or Undo to
// explain a failure the agent may act on.
//
// Every other error that Apply or Undo returns reaches the agent reduced to
// its Go type name (for example "fs.PathError"), so that paths, hostnames
// and credentials in error text stay on the server; the full text is kept in
// the ledger for operators.
type ChangeError struct {
	// ChangeID names the change the error is about, or is empty.
	ChangeID string
	// Msg is the message for the agent.
	Msg string
	// Err is the underlying cause, if any. It is not shown to the agent.
	Err error
	// Kind is the sentinel errors.Is matches ([ErrNotFound], …): every
	// refusal has one ([ErrRefused] for one made by [Refuse]). It is nil
	// for a failure, whose cause is Err.
	Kind error
}

func (e *ChangeError) Error() string { return e.Msg }

func (e *ChangeError) Unwrap() error { return e.Err }

// Is reports whether the error is of the kind target names (ErrNotFound,
// ErrInvalidToken, …), so that trusted code can branch with errors.Is
// instead of reading message text.
func (e *ChangeError) Is(target error) bool { return e.Kind != nil && e.Kind == target }

// Kinds of refusal, for trusted code to match with errors.Is. The agent
// sees the error's message; these are for programs, which should never
// parse that text. Every refusal the library makes carries one of them,
// and so does every error of [Refuse]; an Outcome names them as listed in
// refusalKinds.
var (
	// ErrNotFound: no such change or run, or one of another scope.
	ErrNotFound = errors.New("changeset: not found")
	// ErrInvalidToken: a confirmation or undo token that is malformed or
	// does not match. Nothing was spent.
	ErrInvalidToken = errors.New("changeset: invalid token")
	// ErrExpired: the token's time ran out (a preview, an undo window, a
	// run's dry run).
	ErrExpired = errors.New("changeset: expired")
	// ErrWrongStatus: the change or run is not in a status that allows
	// the step (already applied, already undone, no undo, …).
	ErrWrongStatus = errors.New("changeset: wrong status")
	// ErrRunClosed: the run is being undone or was undone and takes no
	// new changes or applies.
	ErrRunClosed = errors.New("changeset: run closed")
	// ErrBusy: another request claimed the same change or run at the same
	// moment, or a change of the run is in flight. Try again.
	ErrBusy = errors.New("changeset: busy")
	// ErrStateChanged: a resource no longer looks the way the check
	// expected (see [StateChangedError]): it changed between preview and
	// apply, or after the apply, so the undo would overwrite someone's
	// later edit. Nothing was written.
	ErrStateChanged = errors.New("changeset: state changed")
	// ErrPlanChanged: a run's undo plan is no longer the one that was
	// reviewed (the dry run the token was issued for, or the plan the user
	// approved): changes of the run, or their resources, moved since.
	// Nothing was undone; a new dry run shows the plan as it is now.
	ErrPlanChanged = errors.New("changeset: plan changed")
	// ErrWritesDisabled: writes are off (see WritesDisabledError).
	ErrWritesDisabled = errors.New("changeset: writes disabled")
	// ErrQuota: a bound was reached (MaxPendingPerScope, a size limit).
	// Nothing was stored.
	ErrQuota = errors.New("changeset: quota reached")
	// ErrRefused: the operation refused its input or proposal (every
	// error made by [Refuse] is of this kind), the library refused an
	// argument it cannot use (a malformed input, a run label, a page
	// limit), the server's PrincipalFunc or ScopeFunc could not identify
	// the caller, or the user did not approve.
	ErrRefused = errors.New("changeset: refused")
	// ErrNoChange: the preview's diff is empty, so the change would change
	// nothing; nothing was stored (see Operation.AllowEmptyDiff).
	ErrNoChange = errors.New("changeset: nothing would change")
	// ErrDependency: the undo would remove a resource that another change
	// of the same scope depends on (Proposal.DependsOn) and that stays in
	// place. Nothing was undone and the undo token was not spent.
	ErrDependency = errors.New("changeset: depended on")
	// ErrAwaitingApproval: under person approval, the people who must
	// approve the write have not all approved yet (see PersonApproval).
	// Nothing was written and no token was spent; call again later.
	ErrAwaitingApproval = errors.New("changeset: awaiting approval")
	// ErrDeclined: under person approval, a person declined the write.
	// Nothing was written; a declined apply ends its change in the status
	// declined.
	ErrDeclined = errors.New("changeset: declined")
)

// refuse returns a *ChangeError of the given kind about change id (which
// may be empty).
func refuse(kind error, id, format string, args ...any) *ChangeError {
	return &ChangeError{ChangeID: id, Kind: kind, Msg: fmt.Sprintf(format, args...)}
}

// Refuse returns a *ChangeError of kind [ErrRefused] whose message,
// formatted as by fmt.Sprintf, is shown to the agent. Previews use it to
// reject a proposal; Apply and Undo to explain a failure the agent may act
// on.
func Refuse(format string, args ...any) error {
	return refuse(ErrRefused, "", format, args...)
}

// refusalKinds is the one table of the kinds of refusal: each sentinel
// with the name an [Outcome] gives it and the kind the change pipeline
// asks for (package pipeline). failureKind reads it, in this order: a kind
// earlier in the list wins over a later one.
var refusalKinds = []struct {
	err  error
	name string
	kind pipeline.Kind
}{
	{ErrStateChanged, "state_changed", pipeline.StateChanged}, {ErrPlanChanged, "plan_changed", pipeline.PlanChanged},
	{ErrNotFound, "not_found", pipeline.NotFound}, {ErrInvalidToken, "invalid_token", pipeline.InvalidToken},
	{ErrExpired, "expired", pipeline.Expired}, {ErrWrongStatus, "wrong_status", pipeline.WrongStatus},
	{ErrRunClosed, "run_closed", pipeline.RunClosed}, {ErrBusy, "busy", pipeline.Busy},
	{ErrWritesDisabled, "writes_disabled", pipeline.WritesDisabled}, {ErrQuota, "quota", pipeline.Quota},
	{ErrRefused, "refused", pipeline.Refused}, {ErrNoChange, "no_change", pipeline.NoChange},
	{ErrDependency, "dependency", pipeline.Dependency},
	{ErrAwaitingApproval, "awaiting_approval", pipeline.AwaitingApproval}, {ErrDeclined, "declined", pipeline.Declined},
}

// kindError is the sentinel of the pipeline's kind k, nil for
// pipeline.NoKind.
func kindError(k pipeline.Kind) error {
	for _, r := range refusalKinds {
		if r.kind == k {
			return r.err
		}
	}
	return nil
}

// storedErrorKinds is the one table of the error types the library
// itself returns or records: by the type name the ledger stores for a
// failure, the kind a stored failure of that type reads as
// in words (voice.FailureKind) in get_change_status, and what agentText
// says of an error of that type that has no message for the agent. The
// names come from the types themselves, so renaming one keeps the table
// right.
var storedErrorKinds = map[string]string{
	typeName(&StateChangedError{}):   "state_changed",
	typeName(&ChangeError{}):         "refused",
	typeName(&PanicError{}):          "panic",
	typeName(&WritesDisabledError{}): "writes_disabled",
	typeName(&LedgerError{}):         "ledger",
	pipeline.RunUndoType:             "run_undo",
	"Reconciled":                     "interrupted", // ledger.Ledger.Reconcile
}

// storedErrorKind is the kind of a stored failure's error type, or "" for
// an operation's own error type.
func storedErrorKind(errorType string) string { return storedErrorKinds[errorType] }

// WritesDisabledError refuses an apply or undo because the server's write
// mode is not "guarded". It is returned before the change is claimed, so the
// confirmation token stays valid for when writes are enabled.
type WritesDisabledError struct {
	ChangeID string
	// EnvVar is the environment variable that enables writes, or "" when
	// Options.WriteMode fixes the mode.
	EnvVar string
	// Value is what EnvVar held when it was set to something that is not
	// a write mode (a misspelling such as "guraded"), or "".
	Value string
	// verb is what was not done to the change: "applied" (when empty) or
	// "undone".
	verb string
}

// Is reports whether target is ErrWritesDisabled.
func (e *WritesDisabledError) Is(target error) bool { return target == ErrWritesDisabled }

func (e *WritesDisabledError) Error() string {
	return voice.New("", e.EnvVar, voice.Token).WritesOff(e.subject(), e.Value)
}

// subject is what was not done, for the refusal's text.
func (e *WritesDisabledError) subject() string {
	if e.ChangeID == "" {
		return ""
	}
	verb := e.verb
	if verb == "" {
		verb = "applied"
	}
	return voice.NotDone(e.ChangeID, verb)
}

// StateChangedError reports that the resource no longer looks the way the
// check expected: it changed between preview and apply (nothing was
// written), or after the apply, so the undo would overwrite someone's later
// edit (nothing was overwritten).
//
// An operation's Apply or Undo returns one too, with both fields left
// empty, when its own compare-and-set finds the resource changed after the
// Guard's check and it wrote nothing:
//
//	return nil, &changeset.StateChangedError{}
//
// The Guard fills in ChangeID and Phase, records the change as failed with
// failure state_changed and nothing written, and a run's undo keeps the
// change and reports its drift, as when its own check finds the change.
type StateChangedError struct {
	ChangeID string
	// Phase is "apply" or "undo".
	Phase string
	// found is the state the Guard's own check found, kept in the failed
	// change's Before for the people who review it; nil when the
	// operation's own compare-and-set refused.
	found json.RawMessage
}

// Is reports whether target is ErrStateChanged.
func (e *StateChangedError) Is(target error) bool { return target == ErrStateChanged }

func (e *StateChangedError) Error() string { return voice.StateChanged(e.ChangeID, e.Phase) }

// PanicError is the error recorded when an operation's code panics.
type PanicError struct{ Value any }

func (e *PanicError) Error() string { return fmt.Sprintf("panic: %v", e.Value) }

// LedgerError is a failure of the ledger itself (busy, corrupt, unreadable,
// not a ledger, newer schema). It is the ledger package's *ledger.Error.
type LedgerError = ledger.Error

// agentText returns what the agent is told about err: the message of the
// error types above, the kind in words of a failure the library decided,
// and only the Go type name of anything else.
func agentText(err error) string { return pipeline.StorableText(agentMessage(err)) }

// agentMessage is agentText before it is made storable.
func agentMessage(err error) string {
	var (
		ce *ChangeError
		wd *WritesDisabledError
		sc *StateChangedError
		le *LedgerError
		pe *PanicError
	)
	switch {
	case errors.As(err, &ce):
		return ce.Error()
	case errors.As(err, &wd):
		return wd.Error()
	case errors.As(err, &sc):
		return sc.Error()
	case errors.As(err, &le):
		return voice.LedgerFailed(ledgerCause(le))
	case errors.As(err, &pe):
		return voice.FailureKind(storedErrorKind(typeName(pe)))
	}
	return typeName(err)
}

// typeName is the Go type of the outermost error in err's chain that is not
// a plain wrapper made by fmt.Errorf, without a pointer's star, e.g.
// "fs.PathError".
func typeName(err error) string {
	for e := err; e != nil; {
		t := reflect.TypeOf(e).String()
		if t != "*fmt.wrapError" && t != "*fmt.wrapErrors" {
			return strings.TrimLeft(t, "*")
		}
		next := errors.Unwrap(e)
		if next == nil {
			return strings.TrimLeft(t, "*")
		}
		e = next
	}
	return "error"
}

// ledgerCause names the kind of ledger failure without the details (paths,
// SQL) that only operators should see.
func ledgerCause(le *LedgerError) string {
	for _, s := range []error{ledger.ErrBusy, ledger.ErrFull, ledger.ErrCorrupt, ledger.ErrReadOnly, ledger.ErrNotFound,
		ledger.ErrConflict, ledger.ErrForeign, ledger.ErrNewerSchema, ledger.ErrNotExist, ledger.ErrNetworkFS} {
		if errors.Is(le, s) {
			return s.Error()
		}
	}
	return "internal ledger error"
}

// changeNotFound is the refusal for an unknown change (or one of another
// scope). An ID that is not even well formed is quoted and cut short, so
// that whatever the caller sent is not echoed at length.
func changeNotFound(id string) error {
	return &ChangeError{ChangeID: id, Kind: ErrNotFound, Msg: voice.ChangeNotFound(id)}
}
