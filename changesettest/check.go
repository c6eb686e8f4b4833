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
// real tools, and reports with t.Errorf what it finds wrong. It reads the
// state through the operation's Observe with [changeset.Guard.Observe],
// never through the tools. For each input it previews it once, reads the
// state, previews it twice more and reads it again, then:
//
//   - the two reads must agree, else a preview writes;
//   - applies the first preview: the state read after it must differ from
//     the one before, else Observe does not see the apply and no check of
//     the Guard's can catch a stale apply or undo (an apply refused
//     because the state changed means a preview writes, too);
//   - applies the third preview, which saw the state before the first
//     apply: it must be refused;
//   - undoes the first: the state read then must equal the state before
//     the apply, else the undo does not restore it; then applies the
//     second preview, which saw that state too: it must go through (and is
//     undone);
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
// A preview that writes is caught when Observe sees what it writes change
// from one preview to the next (a counter, a log, the change itself); a
// preview that writes the same thing every time, before the first read,
// cannot be told from the state it found.
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
	// lastErr is the error of the last observe.
	lastErr error
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
	var first json.RawMessage // the state after the first preview
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
		if k == 0 {
			if p[0].ConfirmationToken == "" {
				c.errorf("the preview returned no confirmation token: CheckOperation needs changeset.TokenApproval")
				return false
			}
			var ok bool
			if first, ok = c.observe(p[0]); !ok {
				return errors.Is(c.lastErr, changeset.ErrRefused)
			}
		}
	}
	before, ok := c.observe(p[0])
	if !ok {
		return false
	}
	if !bytes.Equal(first, before) {
		c.errorf("a preview writes: Observe returned %s after one preview and %s after two more", brief(first), brief(before))
		return true
	}
	var recs [3]*ledger.Change
	for k := range recs {
		var err error
		if recs[k], err = c.g.Guard.Record(context.Background(), p[k].ChangeID); err != nil {
			c.errorf("reading change %s: %v", p[k].ChangeID, err)
			return false
		}
	}
	samePayload := bytes.Equal(recs[0].Payload, recs[2].Payload)

	// The first apply.
	a1, ok := c.apply(p[0], func(found *ledger.Change, err error) {
		c.t.Helper()
		if found.Failure == ledger.FailureStateChanged {
			c.errorf("a preview writes: after two more previews of the same input, the apply of the first found the state changed")
			return
		}
		c.errorf("apply_change refused the first preview: %v", err)
	})
	if !ok {
		return true
	}
	after, ok := c.observe(p[0])
	if !ok {
		return false
	}
	if bytes.Equal(before, after) {
		c.errorf("Observe does not see the apply: it returned %s both before and after it, so a stale apply or undo goes unnoticed", brief(before))
		if a1.UndoToken != "" {
			_, _ = c.undo(a1)
		}
		return true
	}

	// An apply after the state changed.
	if samePayload {
		if a3, err := c.applyErr(p[2]); err == nil {
			c.errorf("an apply went through after the state changed: a preview saw %s, another preview of the same input was applied (Observe then returned %s), and the first was applied after it", brief(before), brief(after))
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
	undone, ok := c.observe(p[0])
	if !ok {
		return false
	}
	if !bytes.Equal(undone, before) {
		c.errorf("the undo did not restore the state: before the apply Observe returned %s, after the undo %s", brief(before), brief(undone))
		return true
	}

	// A preview made before the first apply, applied after its undo.
	a2, ok := c.apply(p[1], func(found *ledger.Change, err error) {
		c.t.Helper()
		c.errorf("after the undo restored the state, apply_change refused a preview made before the apply: %v", err)
	})
	if !ok {
		return true
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

// observe reads the state of what preview p's change touches, reporting
// a failure; lastErr keeps the error.
func (c *check) observe(p *changeset.PreviewResult) (json.RawMessage, bool) {
	c.t.Helper()
	state, err := c.g.Guard.Observe(context.Background(), p.ChangeID)
	c.lastErr = err
	switch {
	case errors.Is(err, changeset.ErrRefused):
		c.errorf("the operation has no Observe: CheckOperation compares what Observe sees")
		return nil, false
	case err != nil:
		c.errorf("reading the state of change %s through Observe: %v", p.ChangeID, err)
		return nil, false
	}
	return state, true
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
