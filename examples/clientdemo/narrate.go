package main

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// ok prints one line for a step that behaved as promised.
func (d *demo) ok(format string, args ...any) { d.line("✓", format, args...) }

// note prints one line for what the demo itself does: start a server, or
// stand in for a person who edits a note.
func (d *demo) note(format string, args ...any) { d.line("▸", format, args...) }

func (d *demo) line(mark, format string, args ...any) {
	fmt.Fprintf(d.out, "%s %s\n", mark, fmt.Sprintf(format, args...))
}

// detail prints an indented line in --verbose mode only.
func (d *demo) detail(format string, args ...any) {
	if d.verbose {
		fmt.Fprintf(d.out, "    "+format+"\n", args...)
	}
}

// call calls a tool that must succeed and returns its structured result.
func (d *demo) call(ctx context.Context, name string, args map[string]any) (map[string]any, error) {
	res, err := d.tool(ctx, name, args)
	if err != nil {
		return nil, err
	}
	if res.IsError {
		return nil, fmt.Errorf("%s was refused: %s", name, text(res))
	}
	raw, _ := json.Marshal(res.StructuredContent)
	var out map[string]any
	if err := json.Unmarshal(raw, &out); err != nil {
		return nil, fmt.Errorf("%s returned no JSON object: %w", name, err)
	}
	pretty, _ := json.MarshalIndent(out, "    ", "  ")
	d.detail("← %s", pretty)
	return out, nil
}

// refused calls a tool that must be refused with a message containing want,
// and returns the message.
func (d *demo) refused(ctx context.Context, name string, args map[string]any, want string) (string, error) {
	res, err := d.tool(ctx, name, args)
	if err != nil {
		return "", err
	}
	msg := text(res)
	if !res.IsError {
		return "", fmt.Errorf("%s should have been refused (%q), but it succeeded", name, want)
	}
	if !strings.Contains(msg, want) {
		return "", fmt.Errorf("%s should have been refused with %q, got: %s", name, want, msg)
	}
	d.detail("← refused: %s", msg)
	return msg, nil
}

func (d *demo) tool(ctx context.Context, name string, args map[string]any) (*mcp.CallToolResult, error) {
	b, _ := json.Marshal(args)
	d.detail("→ %s %s", name, b)
	res, err := d.cs.CallTool(ctx, &mcp.CallToolParams{Name: name, Arguments: args})
	if err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	return res, nil
}

// short shortens an id or a token for the narration: its prefix up to the
// first underscore and n more characters, then "…" ("confirm_Y1k…"). A
// token is never printed in full outside --verbose.
func short(v any, n int) string {
	s := fmt.Sprint(v)
	i := strings.IndexByte(s, '_') + 1
	if len(s) <= i+n {
		return s
	}
	return s[:i+n] + "…"
}

// id shortens a change or run id; tok shortens a token.
func id(v any) string  { return short(v, 4) }
func tok(v any) string { return short(v, 3) }

// diffLine describes a preview's diff in a few words:
// `content (none) → "buy milk\n"`.
func diffLine(v any) string {
	var parts []string
	for _, e := range list(v) {
		m, _ := e.(map[string]any)
		parts = append(parts, fmt.Sprintf("%v %s → %s", m["field"], value(m["before"]), value(m["after"])))
	}
	if len(parts) == 0 {
		return "no diff"
	}
	return strings.Join(parts, "; ")
}

// value quotes a diff value, cut to a readable length.
func value(v any) string {
	if v == nil {
		return "(none)"
	}
	s, ok := v.(string)
	if !ok {
		b, _ := json.Marshal(v)
		s = string(b)
	}
	return quote(s)
}

// quote quotes s as Go does, cut to 40 characters.
func quote(s string) string {
	if utf8.RuneCountInString(s) > 40 {
		s = string([]rune(s)[:39]) + "…"
	}
	return fmt.Sprintf("%q", s)
}

// names lists the notes of a run report's entries ("note:agenda.txt" →
// "agenda.txt").
func names(v any) string {
	var out []string
	for _, e := range list(v) {
		m, _ := e.(map[string]any)
		out = append(out, strings.TrimPrefix(fmt.Sprint(m["resource"]), "note:"))
	}
	return strings.Join(out, ", ")
}

func text(res *mcp.CallToolResult) string {
	var parts []string
	for _, c := range res.Content {
		if t, ok := c.(*mcp.TextContent); ok {
			parts = append(parts, t.Text)
		}
	}
	return strings.Join(parts, " ")
}

func list(v any) []any {
	l, _ := v.([]any)
	return l
}
