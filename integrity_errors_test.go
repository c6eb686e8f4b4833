package changeset_test

import (
	"context"
	"database/sql"
	"errors"
	"io/fs"
	"strings"
	"testing"

	changeset "github.com/mcp-changeset/changeset-go"
	"github.com/mcp-changeset/changeset-go/ledger"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Failures say what happened: get_change_status and the ledger row carry
// the kind of failure, whether the library knows nothing was written, and
// the error's type name without Go's pointer star. Trusted code branches on
// the Go API's errors with errors.Is, while the agent's texts stay as the
// contract words them.

// blockGate holds the apply of "block" until it is released.
type blockGate struct {
	started chan struct{}
	release chan struct{}
}

// registerBlock registers "block", whose Apply signals started and then
// waits for release.
func registerBlock(g *changeset.Guard) *blockGate {
	gt := &blockGate{started: make(chan struct{}, 1), release: make(chan struct{})}
	changeset.Register(g, &mcp.Tool{Name: "block"}, changeset.Operation[setIn, setIn, setOut]{
		Preview: func(ctx context.Context, in setIn) (*changeset.Proposal[setIn], error) {
			return &changeset.Proposal[setIn]{Payload: in, Summary: "Block on " + in.Key,
				Diff: changeset.DiffFields(nil, map[string]any{in.Key: in.Value})}, nil
		},
		Apply: func(ctx context.Context, p setIn) (setOut, error) {
			gt.started <- struct{}{}
			<-gt.release
			return setOut{}, nil
		},
		Undo: func(ctx context.Context, p setIn, r setOut) error { return nil },
	})
	return gt
}

// registerTxFail registers "txfail", a transactional operation whose Apply writes a
// row of integrity_tx inside the ledger's transaction and then fails.
func registerTxFail(t *testing.T, g *changeset.Guard) {
	t.Helper()
	if _, err := g.Ledger().DB().Exec(`CREATE TABLE integrity_tx (k TEXT PRIMARY KEY)`); err != nil {
		t.Fatal(err)
	}
	changeset.Register(g, &mcp.Tool{Name: "txfail"}, changeset.Operation[setIn, setIn, setOut]{
		Preview: func(ctx context.Context, in setIn) (*changeset.Proposal[setIn], error) {
			return &changeset.Proposal[setIn]{Payload: in, Summary: "Write " + in.Key,
				Diff: changeset.DiffFields(nil, map[string]any{in.Key: in.Value})}, nil
		},
		ApplyTx: func(ctx context.Context, tx *sql.Tx, p setIn) (setOut, error) {
			if _, err := tx.ExecContext(ctx, `INSERT INTO integrity_tx (k) VALUES (?)`, p.Key); err != nil {
				return setOut{}, err
			}
			return setOut{}, &fs.PathError{Op: "write", Path: "/srv/secret", Err: fs.ErrPermission}
		},
	})
}

// wantFailed is what a failed change must show.
type wantFailed struct {
	status         ledger.Status
	failure        ledger.Failure
	nothingWritten bool
	errorType      string // as the ledger records it, for operators
	// shown is get_change_status's error: a failure the library decided
	// in words, an operation's own error by its type name.
	shown string
}

// checkFailed compares get_change_status and the ledger row of change id
// with want.
func checkFailed(t *testing.T, f *fixture, id string, want wantFailed) {
	t.Helper()
	st := mustCall(t, f.session, "get_change_status", map[string]any{"change_id": id})
	if st["status"] != string(want.status) || st["failure"] != string(want.failure) || st["error"] != want.shown {
		t.Errorf("get_change_status: status %v, failure %v, error %v; want %s, %s, %s",
			st["status"], st["failure"], st["error"], want.status, want.failure, want.shown)
	}
	if e, _ := st["error"].(string); strings.Contains(e, "changeset.") {
		t.Errorf("get_change_status: error %q names one of the library's Go identifiers", e)
	}
	nw, present := st["nothing_written"]
	if want.nothingWritten && nw != true {
		t.Errorf("get_change_status: nothing_written = %v, want true", nw)
	}
	if !want.nothingWritten && present {
		t.Errorf("get_change_status: nothing_written = %v, want it absent (a write may have happened)", nw)
	}
	c, err := f.guard.Record(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	if c.Status != want.status || c.Failure != want.failure || c.NothingWritten != want.nothingWritten || c.ErrorType != want.errorType {
		t.Errorf("ledger row: status %s, failure %q, nothing written %v, error type %q; want %+v",
			c.Status, c.Failure, c.NothingWritten, c.ErrorType, want)
	}
}

func TestIntegrity_FailureKinds(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()

	t.Run("state changed before the apply", func(t *testing.T) {
		id, token := f.preview("set", "theme", "dark")
		f.store.set("theme", "blue") // someone's edit
		mustFail(t, f.session, "apply_change", map[string]any{"change_id": id, "confirmation_token": token}, "changed after the preview")
		checkFailed(t, f, id, wantFailed{ledger.ApplyFailed, ledger.FailureStateChanged, true, "changeset.StateChangedError", "state changed: the resource was not in the state the check expected, so nothing was written"})
		// The row keeps what the check found, for the people who review it.
		if c, err := f.guard.Ledger().Change(ctx, id); err != nil || string(c.Before) != `"blue"` || c.After != nil {
			t.Fatalf("the refused change records before %s after %s (%v); want the found state \"blue\" and no after", c.Before, c.After, err)
		}
	})
	t.Run("the operation returned an error", func(t *testing.T) {
		id, token := f.preview("fail", "theme", "dark")
		mustFail(t, f.session, "apply_change", map[string]any{"change_id": id, "confirmation_token": token}, "failed with fs.PathError")
		checkFailed(t, f, id, wantFailed{ledger.ApplyFailed, ledger.FailureError, false, "fs.PathError", "fs.PathError"})
	})
	t.Run("a transactional operation returned an error", func(t *testing.T) {
		registerTxFail(t, f.guard)
		id, token := f.preview("txfail", "k1", "v")
		mustFail(t, f.session, "apply_change", map[string]any{"change_id": id, "confirmation_token": token}, "failed with fs.PathError")
		checkFailed(t, f, id, wantFailed{ledger.ApplyFailed, ledger.FailureError, true, "fs.PathError", "fs.PathError"})
		var n int
		if err := f.guard.Ledger().DB().QueryRow(`SELECT count(*) FROM integrity_tx`).Scan(&n); err != nil || n != 0 {
			t.Fatalf("the rolled-back apply left %d rows (%v)", n, err)
		}
	})
	t.Run("state changed before the undo", func(t *testing.T) {
		id, token := f.preview("set", "language", "fr")
		undoToken := f.apply(id, token)
		f.store.set("language", "de")
		undos := f.store.undos.Load()
		mustFail(t, f.session, "undo_change", map[string]any{"change_id": id, "undo_token": undoToken}, "changed after the change was applied")
		checkFailed(t, f, id, wantFailed{ledger.UndoFailed, ledger.FailureStateChanged, true, "changeset.StateChangedError", "state changed: the resource was not in the state the check expected, so nothing was written"})
		if f.store.undos.Load() != undos || f.store.get("language") != "de" {
			t.Fatal("the refused undo ran")
		}
	})
	t.Run("reconciled while applying", func(t *testing.T) {
		g := registerBlock(f.guard)
		id, token := f.preview("block", "k", "v")
		done := make(chan error, 1)
		go func() {
			_, err := f.guard.Apply(ctx, id, token)
			done <- err
		}()
		<-g.started
		if s := f.status(id); s != ledger.Applying {
			t.Fatalf("status %s while the apply runs", s)
		}
		if _, err := f.guard.Ledger().Reconcile(ctx, id, "the process was stuck; checked the store", "operator:test"); err != nil {
			t.Fatalf("Reconcile: %v", err)
		}
		close(g.release)
		if err := <-done; err == nil || !strings.Contains(err.Error(), "could not record it") {
			t.Errorf("the apply that finished after the reconcile: %v", err)
		}
		checkFailed(t, f, id, wantFailed{ledger.ApplyFailed, ledger.FailureInterrupted, false, "Reconciled", "interrupted: the server stopped while the change was in flight; an operator reconciled it"})
	})
}

// The error types stored are named as the contract says: the package and
// the type, no pointer star, however the error was returned. The agent
// sees an operation's own error by that name, and a failure the library
// decided (a panic caught, a refused state check) in words.
func TestIntegrity_ErrorTypeNamesWithoutStar(t *testing.T) {
	f := newFixture(t)
	cases := []struct{ op, want, shown string }{
		{"fail", "fs.PathError", "fs.PathError"},                                    // returned as *fs.PathError
		{"boom", "changeset.PanicError", "the operation's code crashed (panicked)"}, // a panic, recorded as *changeset.PanicError
		{"set", "changeset.StateChangedError", "state changed: the resource was not in the state the check expected, so nothing was written"},
	}
	for _, c := range cases {
		id, token := f.preview(c.op, "theme", "x-"+c.op)
		if c.op == "set" {
			f.store.set("theme", "edited")
		}
		errText := mustFail(t, f.session, "apply_change", map[string]any{"change_id": id, "confirmation_token": token}, id)
		if strings.Contains(errText, "*") {
			t.Errorf("%s: the agent's text %q names a pointer type", c.op, errText)
		}
		st := mustCall(t, f.session, "get_change_status", map[string]any{"change_id": id})
		rec, err := f.guard.Record(context.Background(), id)
		if err != nil {
			t.Fatal(err)
		}
		if st["error"] != c.shown || rec.ErrorType != c.want {
			t.Errorf("%s: get_change_status error %v, stored ErrorType %q; want %q, %q", c.op, st["error"], rec.ErrorType, c.shown, c.want)
		}
	}
}

// integrityScopeKey carries the scope of a Go API call in its context.
type integrityScopeKey struct{}

func scopedContext(s string) context.Context {
	return context.WithValue(context.Background(), integrityScopeKey{}, s)
}

func scopeFromContext(o *changeset.Options) {
	o.ScopeFunc = func(ctx context.Context, _ *mcp.CallToolRequest) (string, error) {
		s, _ := ctx.Value(integrityScopeKey{}).(string)
		return s, nil
	}
}

// goPreview previews through the Go API and returns the change ID and
// token.
func goPreview(t *testing.T, g *changeset.Guard, ctx context.Context, action string, input any) (string, string) {
	t.Helper()
	res, err := g.Preview(ctx, action, input)
	if err != nil {
		t.Fatalf("Preview(%s): %v", action, err)
	}
	return res.ChangeID, res.ConfirmationToken
}

// wantIs fails t unless err is of kind (errors.Is).
func wantIs(t *testing.T, what string, err, kind error) {
	t.Helper()
	if !errors.Is(err, kind) {
		t.Errorf("%s: %v, want errors.Is %v", what, err, kind)
	}
}

func TestIntegrity_SentinelsOfTheGoAPI(t *testing.T) {
	f := newFixture(t, scopeFromContext)
	g := f.guard
	alice, bob := scopedContext("alice"), scopedContext("bob")
	set := func(k, v string) setIn { return setIn{Key: k, Value: v} }
	const (
		unknownChange = "chg_0123456789abcdef0123"
		unknownRun    = "run_0123456789abcdef0123"
	)
	someConfirm := "confirm_" + strings.Repeat("A", 32)
	someUndo := "undo_" + strings.Repeat("A", 32)

	t.Run("not found", func(t *testing.T) {
		_, err := g.Apply(alice, unknownChange, someConfirm)
		wantIs(t, "Apply of an unknown change", err, changeset.ErrNotFound)
		if err != nil && err.Error() != "change "+unknownChange+" not found" {
			t.Errorf("text %q", err)
		}
		_, err = g.Undo(alice, unknownChange, someUndo)
		wantIs(t, "Undo of an unknown change", err, changeset.ErrNotFound)
		_, err = g.Status(alice, unknownChange)
		wantIs(t, "Status of an unknown change", err, changeset.ErrNotFound)
		_, err = g.Run(alice, unknownRun, changeset.RunPage{})
		wantIs(t, "Run of an unknown run", err, changeset.ErrNotFound)
		_, err = g.UndoRun(alice, unknownRun, true, "")
		wantIs(t, "UndoRun of an unknown run", err, changeset.ErrNotFound)
		_, err = g.Preview(alice, "no_such_operation", set("theme", "dark"))
		wantIs(t, "Preview of an unknown operation", err, changeset.ErrNotFound)
		_, err = g.Preview(alice, "set", map[string]any{"key": "theme", "value": "dark", "run_id": unknownRun})
		wantIs(t, "Preview into an unknown run", err, changeset.ErrNotFound)
	})
	t.Run("other scope", func(t *testing.T) {
		id, token := goPreview(t, g, alice, "set", set("theme", "dark"))
		run, err := g.StartRun(alice, "alice's task")
		if err != nil {
			t.Fatal(err)
		}
		_, err = g.Apply(bob, id, token)
		wantIs(t, "Apply from another scope", err, changeset.ErrNotFound)
		_, err = g.Status(bob, id)
		wantIs(t, "Status from another scope", err, changeset.ErrNotFound)
		_, err = g.Run(bob, run.RunID, changeset.RunPage{})
		wantIs(t, "Run from another scope", err, changeset.ErrNotFound)
		_, err = g.Preview(bob, "set", map[string]any{"key": "theme", "value": "x", "run_id": run.RunID})
		wantIs(t, "Preview into a run of another scope", err, changeset.ErrNotFound)
		if _, err := g.Apply(alice, id, token); err != nil {
			t.Fatalf("Apply in the change's own scope after the refusals: %v", err)
		}
	})
	t.Run("invalid token", func(t *testing.T) {
		a, tokenA := goPreview(t, g, alice, "set", set("language", "fr"))
		_, tokenB := goPreview(t, g, alice, "set", set("language", "de"))
		_, err := g.Apply(alice, a, tokenB)
		wantIs(t, "Apply with another change's token", err, changeset.ErrInvalidToken)
		if want := "invalid confirmation token for change " + a + "; nothing was spent"; err == nil || err.Error() != want {
			t.Errorf("text %q, want %q", err, want)
		}
		_, err = g.Apply(alice, a, "not a token")
		wantIs(t, "Apply with a malformed token", err, changeset.ErrInvalidToken)
		res, err := g.Apply(alice, a, tokenA)
		if err != nil {
			t.Fatalf("Apply with the right token after the refusals: %v", err)
		}
		_, err = g.Undo(alice, a, tokenA)
		wantIs(t, "Undo with the confirmation token", err, changeset.ErrInvalidToken)
		_, err = g.Undo(alice, a, someUndo)
		wantIs(t, "Undo with a wrong undo token", err, changeset.ErrInvalidToken)
		if _, err := g.Undo(alice, a, res.UndoToken); err != nil {
			t.Fatalf("Undo with the right token: %v", err)
		}
	})
	t.Run("expired", func(t *testing.T) {
		id, token := goPreview(t, g, alice, "set", set("font", "serif"))
		applied, applyToken := goPreview(t, g, alice, "set", set("size", "12"))
		res, err := g.Apply(alice, applied, applyToken)
		if err != nil {
			t.Fatal(err)
		}
		f.clock.Advance(changeset.DefaultTTL)
		_, err = g.Apply(alice, id, token)
		wantIs(t, "Apply past the preview's expiry", err, changeset.ErrExpired)
		if s := f.status(id); s != ledger.Expired {
			t.Errorf("status %s, want expired", s)
		}
		f.clock.Advance(changeset.DefaultUndoTTL)
		_, err = g.Undo(alice, applied, res.UndoToken)
		wantIs(t, "Undo past the undo window", err, changeset.ErrExpired)
	})
	t.Run("wrong status", func(t *testing.T) {
		// Through the agent's tools (scope ""), then the Go API: the texts
		// are the contract's.
		id, token := f.preview("set", "theme", "light")
		args := map[string]any{"change_id": id, "confirmation_token": token}
		undoToken := f.apply(id, token)
		want := "change " + id + " cannot be applied (status: applied)"
		if got := mustFail(t, f.session, "apply_change", args, want); got != want {
			t.Errorf("apply twice: %q, want exactly %q", got, want)
		}
		_, err := g.Apply(context.Background(), id, token)
		wantIs(t, "Apply twice", err, changeset.ErrWrongStatus)
		if err != nil && err.Error() != want {
			t.Errorf("Apply twice: %q, want exactly %q", err, want)
		}
		mustCall(t, f.session, "undo_change", map[string]any{"change_id": id, "undo_token": undoToken})
		want = "change " + id + " cannot be undone (status: undone)"
		_, err = g.Undo(context.Background(), id, undoToken)
		wantIs(t, "Undo twice", err, changeset.ErrWrongStatus)
		if err != nil && err.Error() != want {
			t.Errorf("Undo twice: %q, want exactly %q", err, want)
		}
		noUndo, noUndoToken := goPreview(t, g, alice, "noundo", set("theme", "dark"))
		if _, err := g.Apply(alice, noUndo, noUndoToken); err != nil {
			t.Fatal(err)
		}
		_, err = g.Undo(alice, noUndo, someUndo)
		wantIs(t, "Undo of a change without an inverse", err, changeset.ErrWrongStatus)
	})
	t.Run("run closed", func(t *testing.T) {
		run, err := g.StartRun(alice, "task")
		if err != nil {
			t.Fatal(err)
		}
		inRun := func(k, v string) map[string]any { return map[string]any{"key": k, "value": v, "run_id": run.RunID} }
		done, doneToken := goPreview(t, g, alice, "set", inRun("colour", "red"))
		if _, err := g.Apply(alice, done, doneToken); err != nil {
			t.Fatal(err)
		}
		waiting, waitingToken := goPreview(t, g, alice, "set", inRun("shape", "round"))
		if _, err := g.UndoRun(alice, run.RunID, false, changeset.Person("tester")); err != nil {
			t.Fatalf("UndoRun: %v", err)
		}
		_, err = g.Preview(alice, "set", inRun("shape", "square"))
		wantIs(t, "Preview into an undone run", err, changeset.ErrRunClosed)
		_, err = g.Apply(alice, waiting, waitingToken)
		wantIs(t, "Apply of a change of an undone run", err, changeset.ErrRunClosed)
		if f.store.get("shape") != "" {
			t.Fatal("a change of an undone run was applied")
		}
	})
	t.Run("state changed", func(t *testing.T) {
		id, token := goPreview(t, g, alice, "set", set("theme", "blue"))
		f.store.set("theme", "edited")
		_, err := g.Apply(alice, id, token)
		wantIs(t, "Apply after an edit", err, changeset.ErrStateChanged)
		id, token = goPreview(t, g, alice, "set", set("theme", "green"))
		res, err := g.Apply(alice, id, token)
		if err != nil {
			t.Fatal(err)
		}
		f.store.set("theme", "edited again")
		_, err = g.Undo(alice, id, res.UndoToken)
		wantIs(t, "Undo after an edit", err, changeset.ErrStateChanged)
	})
	t.Run("busy", func(t *testing.T) {
		gt := registerBlock(g)
		run, err := g.StartRun(alice, "blocked")
		if err != nil {
			t.Fatal(err)
		}
		id, token := goPreview(t, g, alice, "block", map[string]any{"key": "k", "value": "v", "run_id": run.RunID})
		done := make(chan error, 1)
		go func() {
			_, err := g.Apply(alice, id, token)
			done <- err
		}()
		<-gt.started
		_, err = g.UndoRun(alice, run.RunID, false, changeset.Person("tester"))
		wantIs(t, "UndoRun while a change of the run is applying", err, changeset.ErrBusy)
		_, err = g.Apply(alice, id, token)
		wantIs(t, "Apply of a change that is applying", err, changeset.ErrWrongStatus)
		close(gt.release)
		if err := <-done; err != nil {
			t.Fatalf("the blocked apply: %v", err)
		}
	})
}

func TestIntegrity_WritesDisabledSentinel(t *testing.T) {
	const env = "CHANGESET_TEST_INTEGRITY_WRITES"
	t.Setenv(env, changeset.WriteGuarded)
	f := newFixture(t, func(o *changeset.Options) { o.WriteMode, o.WriteModeEnv = "", env })
	ctx := context.Background()
	applied, applyToken := goPreview(t, f.guard, ctx, "set", setIn{Key: "theme", Value: "dark"})
	res, err := f.guard.Apply(ctx, applied, applyToken)
	if err != nil {
		t.Fatal(err)
	}
	id, token := goPreview(t, f.guard, ctx, "set", setIn{Key: "language", Value: "fr"})

	t.Setenv(env, changeset.WriteDisabled)
	_, err = f.guard.Apply(ctx, id, token)
	wantIs(t, "Apply with writes disabled", err, changeset.ErrWritesDisabled)
	_, err = f.guard.Undo(ctx, applied, res.UndoToken)
	wantIs(t, "Undo with writes disabled", err, changeset.ErrWritesDisabled)
	if f.status(id) != ledger.Pending || f.status(applied) != ledger.Applied || f.store.get("language") != "en" {
		t.Fatal("a refused write changed something")
	}

	// The tokens were not spent.
	t.Setenv(env, changeset.WriteGuarded)
	if _, err := f.guard.Apply(ctx, id, token); err != nil {
		t.Fatalf("Apply once writes are enabled: %v", err)
	}
	if _, err := f.guard.Undo(ctx, applied, res.UndoToken); err != nil {
		t.Fatalf("Undo once writes are enabled: %v", err)
	}
}
