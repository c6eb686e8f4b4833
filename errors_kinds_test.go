package changeset_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"

	changeset "github.com/mcp-changeset/changeset-go"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// TestRefuse_MatchesErrRefused: an operation's refusal is of the kind its
// documentation names, so trusted code can tell it with errors.Is.
func TestRefuse_MatchesErrRefused(t *testing.T) {
	err := changeset.Refuse("unknown setting %q", "colour")
	if !errors.Is(err, changeset.ErrRefused) {
		t.Fatalf("errors.Is(Refuse(…), ErrRefused) = false")
	}
	if err.Error() != `unknown setting "colour"` {
		t.Errorf("Refuse text = %q", err.Error())
	}
	for _, other := range []error{changeset.ErrNotFound, changeset.ErrStateChanged, changeset.ErrPlanChanged, changeset.ErrInvalidToken} {
		if errors.Is(err, other) {
			t.Errorf("Refuse(…) matches %v too", other)
		}
	}
}

// TestErrors_LibraryArgumentRefusalsCarryAKind: the library's own
// refusals of an argument it cannot use are of kind ErrRefused.
func TestErrors_LibraryArgumentRefusalsCarryAKind(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	if _, err := f.guard.StartRun(ctx, strings.Repeat("x", 10_000)); err == nil || !errors.Is(err, changeset.ErrRefused) {
		t.Errorf("StartRun(a label too long) = %v, want an ErrRefused", err)
	}
	if _, err := f.guard.Runs(ctx, "no-such-status", 10); err == nil || !errors.Is(err, changeset.ErrRefused) {
		t.Errorf("Runs(an unknown status) = %v, want an ErrRefused", err)
	}
}

// TestErrors_AnUnidentifiedCallerIsRefusedWithAKind: when the server's
// ScopeFunc or PrincipalFunc fails, the agent's call is refused in the
// library's words (the function's error is never shown) and trusted code
// sees an ErrRefused wrapping the function's error.
func TestErrors_AnUnidentifiedCallerIsRefusedWithAKind(t *testing.T) {
	cause := errors.New("directory lookup of alice@example.com failed")
	for name, c := range map[string]struct {
		edit func(*changeset.Options)
		want string
	}{
		"scope": {func(o *changeset.Options) {
			o.ScopeFunc = func(context.Context, *mcp.CallToolRequest) (string, error) { return "", cause }
		}, "scope could not be determined"},
		"principal": {func(o *changeset.Options) {
			o.Principal = func(context.Context, *mcp.CallToolRequest) (string, error) { return "", cause }
		}, "caller could not be identified"},
	} {
		t.Run(name, func(t *testing.T) {
			seen := &outcomes{}
			f := newFixture(t, c.edit, func(o *changeset.Options) { o.Observer = seen })
			text := mustFail(t, f.session, "preview_set", map[string]any{"key": "theme", "value": "dark"}, c.want)
			if strings.Contains(text, "alice") {
				t.Errorf("the refusal shows the function's error: %q", text)
			}
			out := seen.last()
			if !errors.Is(out.Err, changeset.ErrRefused) || !errors.Is(out.Err, cause) {
				t.Errorf("Outcome.Err = %v, want an ErrRefused wrapping the function's error", out.Err)
			}
		})
	}
}

// outcomes records the Outcomes an Observer sees.
type outcomes struct {
	mu  sync.Mutex
	all []changeset.Outcome
}

func (o *outcomes) Start(ctx context.Context, e changeset.Event) (context.Context, func(changeset.Outcome)) {
	return ctx, func(out changeset.Outcome) {
		o.mu.Lock()
		defer o.mu.Unlock()
		o.all = append(o.all, out)
	}
}

func (o *outcomes) Transition(context.Context, changeset.Transition) {}

func (o *outcomes) last() changeset.Outcome {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.all[len(o.all)-1]
}

// TestUndoRun_ChangedPlanIsErrPlanChangedNotErrStateChanged: a run undo
// refused because its plan changed since the dry run is of its own kind,
// apart from a changed resource, and an Observer names it plan_changed.
func TestUndoRun_ChangedPlanIsErrPlanChangedNotErrStateChanged(t *testing.T) {
	seen := &outcomes{}
	base := newFixtureOn(t, sqliteKit(t), func(o *changeset.Options) { o.Observer = seen })
	d := &docs{next: 2, m: map[int]doc{1: {1, "alpha", "t1"}, 2: {2, "beta", "t2"}}}
	registerDocOps(base.guard, d)
	f := &runFixture{fixture: base, docs: d}

	run := f.startRun("Plan")
	f.do(run, "rename_doc", map[string]any{"id": 1, "title": "one"})
	f.do(run, "rename_doc", map[string]any{"id": 2, "title": "two"})
	dry := f.dryRun(run)
	f.docs.put(doc{ID: 2, Title: "edited", Created: "t2"}) // a person's edit: the plan now keeps doc 2
	mustFail(t, f.session, "undo_run", map[string]any{"run_id": run, "dry_run": false, "confirmation_token": dry["confirmation_token"]}, "changed since the dry run")

	out := seen.last()
	if out.Failure != "plan_changed" {
		t.Errorf("Outcome.Failure = %q, want plan_changed", out.Failure)
	}
	if !errors.Is(out.Err, changeset.ErrPlanChanged) || errors.Is(out.Err, changeset.ErrStateChanged) {
		t.Errorf("Outcome.Err = %v: ErrPlanChanged %v, ErrStateChanged %v; want only ErrPlanChanged",
			out.Err, errors.Is(out.Err, changeset.ErrPlanChanged), errors.Is(out.Err, changeset.ErrStateChanged))
	}
}
