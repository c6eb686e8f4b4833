package changeset

import "os"

// Write modes. Apply and undo run only in WriteGuarded mode; previews work in
// both.
const (
	WriteGuarded  = "guarded"
	WriteDisabled = "disabled"
)

// WritesEnabled reports whether apply and undo may run now: WriteMode is
// WriteGuarded, or WriteMode is empty and the environment variable reads
// "guarded". The variable is read at each call, so an operator can turn
// writes off without restarting a server (pending previews stay valid).
func (g *Guard) WritesEnabled() bool {
	if g.opts.WriteMode != "" {
		return g.opts.WriteMode == WriteGuarded
	}
	return os.Getenv(g.opts.WriteModeEnv) == WriteGuarded
}

// unknownWriteMode is the value of the write-mode variable when the
// options leave the mode to it and it holds neither WriteGuarded nor
// WriteDisabled (nor nothing); "" otherwise.
func (g *Guard) unknownWriteMode() string {
	if g.opts.WriteMode != "" {
		return ""
	}
	switch v := os.Getenv(g.opts.WriteModeEnv); v {
	case "", WriteGuarded, WriteDisabled:
		return ""
	default:
		return v
	}
}

// writesOff is the refusal of a write while writes are off: of change id
// (not verb, "applied" or "undone"), or of writes in general when id is "".
func (g *Guard) writesOff(id, verb string) *WritesDisabledError {
	e := &WritesDisabledError{ChangeID: id, verb: verb, Value: g.unknownWriteMode()}
	if g.opts.WriteMode == "" {
		e.EnvVar = g.opts.WriteModeEnv
	}
	return e
}
