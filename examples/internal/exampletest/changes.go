package exampletest

import (
	"encoding/json"
)

// Preview is the result of a preview_<op> tool.
type Preview struct {
	Status            string `json:"status"`
	ChangeID          string `json:"change_id"`
	Action            string `json:"action"`
	Summary           string `json:"summary"`
	Diff              []Diff `json:"diff"`
	ConfirmationToken string `json:"confirmation_token"`
	WritesEnabled     bool   `json:"writes_enabled"`
}

// Diff is one entry of a preview's diff.
type Diff struct {
	Field  string `json:"field"`
	Before any    `json:"before"`
	After  any    `json:"after"`
}

// Applied is the result of apply_change.
type Applied struct {
	Status    string          `json:"status"`
	ChangeID  string          `json:"change_id"`
	Result    json.RawMessage `json:"result"`
	UndoToken string          `json:"undo_token"`
}

// Preview calls preview_<op> and fails the test on a tool error.
func (c *Client) Preview(op string, args map[string]any) Preview {
	c.t.Helper()
	var p Preview
	Decode(c.t, c.Must("preview_"+op, args), &p)
	if p.Status != "preview" || p.ChangeID == "" || p.ConfirmationToken == "" {
		c.t.Fatalf("preview_%s: unexpected result %+v", op, p)
	}
	return p
}

func (p Preview) applyArgs() map[string]any {
	return map[string]any{"change_id": p.ChangeID, "confirmation_token": p.ConfirmationToken}
}

// Apply applies a previewed change and fails the test on a tool error.
func (c *Client) Apply(p Preview) Applied {
	c.t.Helper()
	var a Applied
	Decode(c.t, c.Must("apply_change", p.applyArgs()), &a)
	if a.Status != "applied" || a.ChangeID != p.ChangeID {
		c.t.Fatalf("apply_change: unexpected result %+v", a)
	}
	return a
}

// ApplyResult applies a previewed change and decodes its result into
// *into.
func (c *Client) ApplyResult(p Preview, into any) Applied {
	c.t.Helper()
	a := c.Apply(p)
	if err := json.Unmarshal(a.Result, into); err != nil {
		c.t.Fatalf("apply result %s: %v", a.Result, err)
	}
	return a
}

// ApplyRefused applies a previewed change that must be refused with an
// error holding want, and returns the error text.
func (c *Client) ApplyRefused(p Preview, want string) string {
	c.t.Helper()
	return c.Refused("apply_change", p.applyArgs(), want)
}

func (a Applied) undoArgs() map[string]any {
	return map[string]any{"change_id": a.ChangeID, "undo_token": a.UndoToken}
}

// Undo undoes an applied change and fails the test on a tool error.
func (c *Client) Undo(a Applied) {
	c.t.Helper()
	out := c.Must("undo_change", a.undoArgs())
	if out["status"] != "undone" {
		c.t.Fatalf("undo_change: unexpected result %v", out)
	}
}

// UndoRefused undoes an applied change that must be refused with an error
// holding want, and returns the error text.
func (c *Client) UndoRefused(a Applied, want string) string {
	c.t.Helper()
	return c.Refused("undo_change", a.undoArgs(), want)
}

// Status returns the change's status from get_change_status.
func (c *Client) Status(changeID string) string {
	c.t.Helper()
	out := c.Must("get_change_status", map[string]any{"change_id": changeID})
	s, _ := out["status"].(string)
	return s
}
