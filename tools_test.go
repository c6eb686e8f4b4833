package changeset_test

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	changeset "github.com/mcp-changeset/changeset-go"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

func TestTools_NamesAnnotationsAndSchemas(t *testing.T) {
	t.Parallel()
	onEachBackend(t, func(t *testing.T, kit backendKit) {
		f := newFixtureOn(t, kit, func(o *changeset.Options) { o.Prefix = "acme_" })
		res, err := f.session.ListTools(context.Background(), nil)
		if err != nil {
			t.Fatal(err)
		}
		tools := map[string]*mcp.Tool{}
		for _, tool := range res.Tools {
			tools[tool.Name] = tool
		}
		for _, name := range []string{"acme_preview_set", "acme_apply_change", "acme_undo_change", "acme_get_change_status"} {
			if tools[name] == nil {
				t.Fatalf("tool %s missing; have %v", name, tools)
			}
		}
		// A read-only tool's destructiveHint means nothing (MCP: it counts
		// only when readOnlyHint is false), so a preview leaves it out.
		if a := tools["acme_preview_set"].Annotations; !a.ReadOnlyHint || (a.DestructiveHint != nil && *a.DestructiveHint) {
			t.Errorf("preview annotations = %+v", a)
		}
		if a := tools["acme_apply_change"].Annotations; a.ReadOnlyHint || a.DestructiveHint == nil || !*a.DestructiveHint {
			t.Errorf("apply annotations = %+v", a)
		}
		if a := tools["acme_undo_change"].Annotations; a.DestructiveHint == nil || !*a.DestructiveHint {
			t.Errorf("undo annotations = %+v", a)
		}
		if !tools["acme_get_change_status"].Annotations.ReadOnlyHint {
			t.Error("get_change_status is not read-only")
		}
		in, _ := json.Marshal(tools["acme_preview_set"].InputSchema)
		if !strings.Contains(string(in), `"run_id"`) {
			t.Errorf("preview input schema lacks run_id: %s", in)
		}
		// Clients on the official TypeScript SDK reject a tools/list in which
		// any property schema is the bare schema true, or an output schema is
		// not an object.
		for name, tool := range tools {
			for kind, schema := range map[string]any{"input": tool.InputSchema, "output": tool.OutputSchema} {
				raw, _ := json.Marshal(schema)
				var v any
				_ = json.Unmarshal(raw, &v)
				if kind == "output" && v != nil && v.(map[string]any)["type"] != "object" {
					t.Errorf("%s: output schema is not an object: %s", name, raw)
				}
				if path := findBareTrue(v, ""); path != "" {
					t.Errorf("%s: %s schema has a bare true at %s", name, kind, path)
				}
			}
		}
	})
}

func TestInstructions_AppendedToServersOwn(t *testing.T) {
	t.Parallel()
	onEachBackend(t, func(t *testing.T, kit backendKit) {
		server := mcp.NewServer(&mcp.Implementation{Name: "x", Version: "1"}, &mcp.ServerOptions{Instructions: "Own words."})
		g, err := changeset.New(server, changeset.Options{Ledger: kit.Ledger(t)})
		if err != nil {
			t.Fatal(err)
		}
		defer g.Close()
		cs := connect(t, server)
		got := cs.InitializeResult().Instructions
		if !strings.HasPrefix(got, "Own words.") || !strings.Contains(got, g.Instructions()) {
			t.Fatalf("instructions = %q", got)
		}
	})
}

func TestRegister_ProgrammingErrorsPanic(t *testing.T) {
	t.Parallel()
	onEachBackend(t, func(t *testing.T, kit backendKit) {
		f := newFixtureOn(t, kit)
		preview := func(context.Context, setIn) (*changeset.Proposal[setIn], error) { return nil, nil }
		apply := func(context.Context, setIn) (setOut, error) { return setOut{}, nil }
		applyTx := func(context.Context, *sql.Tx, setIn) (setOut, error) { return setOut{}, nil }
		type in struct {
			RunID string `json:"run_id"`
		}
		for _, c := range []struct {
			name, want string
			op         changeset.Operation[setIn, setIn, setOut]
			tool       string
		}{
			{"duplicate", "registered twice", changeset.Operation[setIn, setIn, setOut]{Preview: preview, Apply: apply}, "set"},
			{"no preview", "Preview is required", changeset.Operation[setIn, setIn, setOut]{Apply: apply}, "x"},
			{"no apply", "Apply (or ApplyTx", changeset.Operation[setIn, setIn, setOut]{Preview: preview}, "x"},
			{"both applies", "not both", changeset.Operation[setIn, setIn, setOut]{Preview: preview, Apply: apply, ApplyTx: applyTx}, "x"},
			{"Apply with UndoTx", "not UndoTx or ObserveTx", changeset.Operation[setIn, setIn, setOut]{Preview: preview, Apply: apply,
				UndoTx: func(context.Context, *sql.Tx, setIn, setOut) error { return nil }}, "x"},
			{"ApplyTx with Observe", "not Undo or Observe", changeset.Operation[setIn, setIn, setOut]{Preview: preview, ApplyTx: applyTx,
				Observe: func(context.Context, setIn) (any, error) { return nil, nil }}, "x"},
			{"no name", "needs a name", changeset.Operation[setIn, setIn, setOut]{Preview: preview, Apply: apply}, ""},
		} {
			got := panicOf(func() { changeset.Register(f.guard, &mcp.Tool{Name: c.tool}, c.op) })
			if !strings.Contains(got, c.want) {
				t.Errorf("%s: panic %q, want one saying %q", c.name, got, c.want)
			}
		}
		got := panicOf(func() {
			changeset.Register(f.guard, &mcp.Tool{Name: "y"}, changeset.Operation[in, in, setOut]{
				Preview: func(context.Context, in) (*changeset.Proposal[in], error) { return nil, nil },
				Apply:   func(context.Context, in) (setOut, error) { return setOut{}, nil },
			})
		})
		if !strings.Contains(got, "run_id") {
			t.Errorf("own run_id: panic %q, want one naming run_id", got)
		}
		// Nothing that panicked was registered: the names are still free.
		changeset.Register(f.guard, &mcp.Tool{Name: "x"}, changeset.Operation[setIn, setIn, setOut]{Preview: preview, ApplyTx: applyTx})
	})
}

// panicOf returns what fn panics with, as text, or "" when it returns.
func panicOf(fn func()) (msg string) {
	defer func() {
		if r := recover(); r != nil {
			msg = fmt.Sprint(r)
		}
	}()
	fn()
	return ""
}

// findBareTrue returns the path of a property or items schema that is the
// boolean true, or "".
func findBareTrue(v any, path string) string {
	m, ok := v.(map[string]any)
	if !ok {
		return ""
	}
	if props, ok := m["properties"].(map[string]any); ok {
		for k, p := range props {
			if b, ok := p.(bool); ok && b {
				return path + ".properties." + k
			}
			if found := findBareTrue(p, path+"."+k); found != "" {
				return found
			}
		}
	}
	if items, ok := m["items"]; ok {
		if b, ok := items.(bool); ok && b {
			return path + ".items"
		}
		return findBareTrue(items, path+"[]")
	}
	return ""
}
