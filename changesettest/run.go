package changesettest

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	changeset "github.com/mcp-changeset/changeset-go"
)

// Call is one tool call of a task for [CheckRun]: the operation, as given
// to Register (without "preview_"), and the preview's arguments, any value
// that encodes to a JSON object.
type Call struct {
	Op   string
	Args any
}

// CheckRun checks that a task made of calls can be undone as one run, the
// way an agent would: it starts a run, previews each call in it and
// applies it, in order, then asks undo_run for a dry run and carries it
// out with its confirmation token. It reports with t.Errorf:
//
//   - a preview or apply refused (the calls must be valid in sequence);
//   - a dry run that does not plan to undo every change of the run;
//   - a real undo that does not undo exactly what the dry run planned, or
//     leaves the run open;
//   - a resource whose state, read through the operation's Observe with
//     [changeset.Guard.Observe], is not after the undo what it was before
//     the run's first change of it was applied (the state a change that
//     names no resource touches is not compared: the run cannot relate
//     such changes to each other).
//
// CheckRun moves the Guard's Clock, when it has one, a second before each
// call, since a run orders its changes by when they were applied.
//
// Use it with a list of calls that touch the same things several times
// (create, update, delete of one record) to check that an operation's undo
// composes with the others'.
func CheckRun(t testing.TB, g *Guard, calls ...Call) {
	t.Helper()
	fail := func(format string, args ...any) {
		t.Helper()
		t.Errorf("changesettest: CheckRun: "+format, args...)
	}
	var run changeset.RunInfo
	if err := g.call("start_run", map[string]any{"label": "changesettest.CheckRun"}, &run); err != nil {
		fail("start_run: %v", err)
		return
	}
	before := map[string]json.RawMessage{} // resource key → state before the run's first change of it
	var order []string
	for i, c := range calls {
		if g.Clock != nil {
			// A run orders its changes by when they were applied: on a
			// clock that never moves they would all be applied at once.
			g.Clock.Advance(time.Second)
		}
		args, err := withRunID(c.Args, run.RunID)
		if err != nil {
			fail("call %d (%s): %v", i+1, c.Op, err)
			return
		}
		var p changeset.PreviewResult
		if err := g.call("preview_"+c.Op, args, &p); err != nil {
			fail("call %d: preview_%s refused: %v", i+1, c.Op, err)
			return
		}
		rec, err := g.Guard.Record(context.Background(), p.ChangeID)
		if err != nil {
			fail("reading change %s: %v", p.ChangeID, err)
			return
		}
		if key := resourceKey(rec.Resource, rec.Resources); key != "" {
			if _, seen := before[key]; !seen {
				state, err := g.Guard.Observe(context.Background(), p.ChangeID)
				if err != nil {
					fail("reading the state of change %s through Observe: %v", p.ChangeID, err)
					return
				}
				before[key] = state
				order = append(order, p.ChangeID+" "+key)
			}
		}
		if p.ConfirmationToken == "" {
			fail("preview_%s returned no confirmation token: CheckRun needs changeset.TokenApproval", c.Op)
			return
		}
		var a changeset.ApplyResult
		if err := g.call("apply_change", applyArgs(&p), &a); err != nil {
			fail("call %d: apply_change of preview_%s refused: %v", i+1, c.Op, err)
			return
		}
	}

	var dry changeset.RunReport
	if err := g.call("undo_run", map[string]any{"run_id": run.RunID}, &dry); err != nil {
		fail("the dry run: %v", err)
		return
	}
	if len(dry.Skipped)+len(dry.Irreversible) > 0 {
		fail("the dry run keeps changes of the run: skipped %s, irreversible %s", notes(dry.Skipped), notes(dry.Irreversible))
	}
	planned := append(stepIDs(dry.WillUndo), stepIDs(dry.NoNetChange)...)
	if len(planned) == 0 {
		fail("the dry run plans nothing: %s", dry.NextStep)
		return
	}
	var done changeset.RunReport
	if err := g.call("undo_run", map[string]any{"run_id": run.RunID, "dry_run": false, "confirmation_token": dry.ConfirmationToken}, &done); err != nil {
		fail("the real undo: %v", err)
		return
	}
	if !slices.Equal(stepIDs(done.Undone), stepIDs(dry.WillUndo)) || len(done.NotCarriedOut) > 0 || len(done.Failed) > 0 {
		fail("the real undo did not carry out the dry run's plan: planned %v, undone %v, not carried out %v, failed %s",
			stepIDs(dry.WillUndo), stepIDs(done.Undone), done.NotCarriedOut, notes(done.Failed))
	}
	if done.Status == "open" {
		fail("the run is still open after its undo")
	}
	for _, entry := range order {
		id, key, _ := strings.Cut(entry, " ")
		now, err := g.Guard.Observe(context.Background(), id)
		if err != nil {
			fail("reading the state of change %s through Observe: %v", id, err)
			continue
		}
		if !bytes.Equal(now, before[key]) {
			fail("the run's undo did not restore %s: before the run Observe returned %s, after the undo %s", key, brief(before[key]), brief(now))
		}
	}
}

// withRunID returns args, a value that encodes to a JSON object, with
// run_id set.
func withRunID(args any, runID string) (map[string]any, error) {
	m := map[string]any{}
	if args != nil {
		b, err := json.Marshal(args)
		if err != nil {
			return nil, err
		}
		if err := json.Unmarshal(b, &m); err != nil {
			return nil, fmt.Errorf("the arguments must encode to a JSON object: %w", err)
		}
	}
	m["run_id"] = runID
	return m, nil
}

// resourceKey names what a change touches for CheckRun, or "".
func resourceKey(resource string, resources []string) string {
	if resource != "" {
		return resource
	}
	return strings.Join(resources, ", ")
}

func stepIDs(steps []changeset.RunStep) []string {
	ids := []string{}
	for _, s := range steps {
		ids = append(ids, s.ChangeID)
	}
	return ids
}

func notes(ns []changeset.RunNote) string {
	var out []string
	for _, n := range ns {
		out = append(out, n.ChangeID+" ("+n.Reason+")")
	}
	return "[" + strings.Join(out, "; ") + "]"
}
