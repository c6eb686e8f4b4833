package changesettest

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"testing"

	changeset "github.com/mcp-changeset/changeset-go"
	"github.com/mcp-changeset/changeset-go/ledger"
)

// Input is an input to [CheckOperation] that needs more than its
// arguments. Any other value passed to CheckOperation is taken as the
// arguments themselves.
type Input struct {
	// Args are the preview tool's arguments: any value that encodes to a
	// JSON object (the operation's input type, a map).
	Args any
	// Mutate changes, behind the Guard's back, the state that a preview
	// of Args saw, as a person editing it by hand would. It receives the
	// preview's stored payload (the canonical JSON of the operation's
	// payload type) and must change what Observe returns for it.
	//
	// Leave it nil for an operation whose previews of one input store one
	// payload (a setting, a named record): CheckOperation then changes the
	// state by applying another preview of the same input. Set it for an
	// operation whose preview chooses something new each time, such as
	// the id of a record it creates: applying one such preview does not
	// change what another saw.
	Mutate func(payload json.RawMessage) error
}

// CheckOperation checks the operation registered as tool on g (the name
// given to Register, without "preview_") against each input, through the
// real tools, and reports with t.Errorf what it finds wrong. For each
// input it makes three previews of it, then:
//
//   - applies the first: an apply refused because the state changed
//     means a later preview wrote (Observe saw something else after
//     it), and so does a later preview refused when the first was not
//     (it found its own change already made);
//   - compares what Observe saw just before and just after that apply:
//     equal means Observe does not see the apply, and no check of the
//     Guard's can catch a stale apply or undo;
//   - applies the third preview, which saw the state before the first
//     apply: it must be refused;
//   - undoes the first, then applies the second preview, which saw the
//     state before the first apply: it must go through, and Observe must
//     see what it saw before the first apply, else the undo did not
//     restore the state; then undoes it too;
//   - when the input is an [Input] with Mutate, calls Mutate with the
//     third preview's payload and applies that preview: it must be
//     refused.
//
// An operation with no Undo skips the undo checks. CheckOperation needs
// the operation to have an Observe and the Guard to hand out confirmation
// tokens (changeset.TokenApproval). The inputs must be valid: a first
// preview refused fails the test. Between inputs the state is as the last
// undo left it, so an input may rely on what earlier inputs leave, but
// CheckOperation undoes what it applies.
//
// What a preview writes is caught when Observe sees it and it builds up
// (a counter, a log) or it is the change itself; a preview that writes the
// same thing every time somewhere Observe looks cannot be told from the
// state it found.
func CheckOperation(t testing.TB, g *Guard, tool string, inputs ...any) {
	t.Helper()
	for i, in := range inputs {
		var input Input
		switch v := in.(type) {
		case Input:
			input = v
		case *Input:
			input = *v
		default:
			input = Input{Args: in}
		}
		c := &check{t: t, g: g, tool: tool, input: input, name: fmt.Sprintf("%s, input %d %s", tool, i+1, brief(input.Args))}
		if !c.run() {
			return
		}
	}
}

// check is CheckOperation for one input.
type check struct {
	t     testing.TB
	g     *Guard
	tool  string
	input Input
	name  string
}

// errorf reports a failure of the check.
func (c *check) errorf(format string, args ...any) {
	c.t.Helper()
	c.t.Errorf("changesettest: %s: %s", c.name, fmt.Sprintf(format, args...))
}

// run checks the input. It returns false after a failure that leaves
// nothing to check for the next inputs (the tools cannot be called).
func (c *check) run() bool {
	c.t.Helper()
	var p [3]*changeset.PreviewResult
	for k := range p {
		var err error
		if p[k], err = c.preview(); err != nil {
			if !isToolError(err) {
				c.errorf("%v", err)
				return false
			}
			if k == 0 {
				c.errorf("the preview was refused (the inputs must be valid): %v", err)
			} else {
				c.errorf("a preview writes: a second preview of the same input was refused, the first was not: %v", err)
			}
			return true
		}
	}
	if p[0].ConfirmationToken == "" {
		c.errorf("the preview returned no confirmation token: CheckOperation needs changeset.TokenApproval")
		return false
	}
	var recs [3]*ledger.Change
	for k := range recs {
		var err error
		if recs[k], err = c.g.Guard.Record(context.Background(), p[k].ChangeID); err != nil {
			c.errorf("reading change %s: %v", p[k].ChangeID, err)
			return false
		}
	}
	if recs[0].StateHash == "" {
		c.errorf("the operation has no Observe: CheckOperation compares what Observe sees")
		return true
	}
	samePayload := bytes.Equal(recs[0].Payload, recs[2].Payload)

	// The first apply, after two more previews.
	a1, ok := c.apply(p[0], func(found *ledger.Change, err error) {
		c.t.Helper()
		if found.Failure == ledger.FailureStateChanged {
			c.errorf("a preview writes: after two more previews of the same input, the apply of the first found the state changed (Observe now returns %s)", brief(found.Before))
			return
		}
		c.errorf("apply_change refused the first preview: %v", err)
	})
	if !ok {
		return true
	}
	rec1, err := c.g.Guard.Record(context.Background(), p[0].ChangeID)
	if err != nil {
		c.errorf("reading change %s: %v", p[0].ChangeID, err)
		return false
	}
	if bytes.Equal(rec1.Before, rec1.After) {
		c.errorf("Observe does not see the apply: it returned %s both before and after it, so a stale apply or undo goes unnoticed", brief(rec1.Before))
		if a1.UndoToken != "" {
			_, _ = c.undo(a1)
		}
		return true
	}

	// An apply after the state changed.
	if samePayload {
		if a3, err := c.applyErr(p[2]); err == nil {
			c.errorf("an apply went through after the state changed: a preview saw %s, another preview of the same input was applied (Observe then returned %s), and the first was applied after it", brief(rec1.Before), brief(rec1.After))
			if a3.UndoToken != "" {
				_, _ = c.undo(a3)
			}
		} else if !isToolError(err) {
			c.errorf("%v", err)
			return false
		}
	}

	if a1.UndoToken == "" {
		c.t.Logf("changesettest: %s: the operation has no undo; the undo checks are skipped", c.name)
		return true
	}
	if _, err := c.undo(a1); err != nil {
		c.errorf("undo_change refused the undo of a change nobody touched since its apply: %v", err)
		return isToolError(err)
	}

	// What Observe sees after the undo, through the second preview.
	a2, ok := c.apply(p[1], func(found *ledger.Change, err error) {
		c.t.Helper()
		if found.Failure == ledger.FailureStateChanged {
			c.errorf("the undo did not restore the state: before the apply Observe returned %s, after the undo %s", brief(rec1.Before), brief(found.Before))
			return
		}
		c.errorf("after the undo, apply_change refused a preview made before the apply: %v", err)
	})
	if !ok {
		return true
	}
	rec2, err := c.g.Guard.Record(context.Background(), p[1].ChangeID)
	if err != nil {
		c.errorf("reading change %s: %v", p[1].ChangeID, err)
		return false
	}
	if bytes.Equal(recs[0].Payload, recs[1].Payload) && !bytes.Equal(rec2.Before, rec1.Before) {
		c.errorf("the undo did not restore the state: before the apply Observe returned %s, after the undo %s", brief(rec1.Before), brief(rec2.Before))
	}
	if _, err := c.undo(a2); err != nil {
		c.errorf("undo_change refused the undo of a change nobody touched since its apply: %v", err)
		return isToolError(err)
	}

	// A state changed by the test.
	switch {
	case c.input.Mutate != nil:
		if err := c.input.Mutate(recs[2].Payload); err != nil {
			c.errorf("Mutate: %v", err)
			return true
		}
		if _, err := c.applyErr(p[2]); err == nil {
			c.errorf("an apply went through after Mutate changed the state its preview saw")
		} else if !isToolError(err) {
			c.errorf("%v", err)
			return false
		}
	case !samePayload:
		c.errorf("two previews of the same input stored different payloads (%s and %s), so applying one does not change what the other saw: pass a changesettest.Input whose Mutate changes the state a preview saw",
			brief(recs[0].Payload), brief(recs[2].Payload))
	}
	return true
}

func (c *check) preview() (*changeset.PreviewResult, error) {
	var p changeset.PreviewResult
	if err := c.g.call("preview_"+c.tool, c.input.Args, &p); err != nil {
		return nil, err
	}
	return &p, nil
}

func (c *check) applyErr(p *changeset.PreviewResult) (*changeset.ApplyResult, error) {
	var a changeset.ApplyResult
	if err := c.g.call("apply_change", applyArgs(p), &a); err != nil {
		return nil, err
	}
	return &a, nil
}

// apply applies p. When the apply is refused it calls refused with the
// change as the ledger holds it and the error, and returns false.
func (c *check) apply(p *changeset.PreviewResult, refused func(found *ledger.Change, err error)) (*changeset.ApplyResult, bool) {
	c.t.Helper()
	a, err := c.applyErr(p)
	if err == nil {
		return a, true
	}
	found, rerr := c.g.Guard.Record(context.Background(), p.ChangeID)
	if !isToolError(err) || rerr != nil {
		c.errorf("%v", errors.Join(err, rerr))
		return nil, false
	}
	refused(found, err)
	return nil, false
}

func (c *check) undo(a *changeset.ApplyResult) (*changeset.UndoResult, error) {
	var u changeset.UndoResult
	if err := c.g.call("undo_change", undoArgs(a), &u); err != nil {
		return nil, err
	}
	return &u, nil
}

func isToolError(err error) bool {
	var te *ToolError
	return errors.As(err, &te)
}

// brief renders v as JSON for a message, cut to a readable length.
func brief(v any) string {
	var b []byte
	switch v := v.(type) {
	case json.RawMessage:
		b = v
	default:
		var err error
		if b, err = json.Marshal(v); err != nil {
			return fmt.Sprint(v)
		}
	}
	if b == nil {
		return "null"
	}
	if len(b) > 200 {
		return string(b[:120]) + "…" + string(b[len(b)-60:])
	}
	return string(b)
}
