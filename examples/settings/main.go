// Command settings is the quickstart: an MCP server with two in-memory
// settings, theme and language, whose one write, set_setting, is guarded.
//
// The agent calls preview_set_setting and gets a diff and a confirmation
// token; apply_change applies exactly the previewed value, once, and only if
// the setting still holds the value the preview saw; undo_change puts the old
// value back unless someone changed it since. get_settings reads them.
//
//	MCP_CHANGESET_WRITE_MODE=guarded go run ./examples/settings --ledger /tmp/settings.db
//
// It takes the flags every example takes (see go run ./examples/settings
// --help), among them --http ADDR with --auth-token-file FILE to serve
// Streamable HTTP instead of stdio.
package main

import (
	"context"
	"fmt"
	"log/slog"
	"sync"

	changeset "github.com/mcp-changeset/changeset-go"
	"github.com/mcp-changeset/changeset-go/examples/internal/serve"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// store holds the settings. A real server would keep them in a database.
type store struct {
	mu       sync.Mutex
	settings map[string]string
}

func (s *store) get(key string) (string, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	v, ok := s.settings[key]
	return v, ok
}

func (s *store) set(key, value string) (previous string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	previous = s.settings[key]
	s.settings[key] = value
	return previous
}

func (s *store) snapshot() map[string]string {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make(map[string]string, len(s.settings))
	for k, v := range s.settings {
		out[k] = v
	}
	return out
}

// setting is both the tool's input and the stored payload.
type setting struct {
	Key   string `json:"key" jsonschema:"the setting to change: theme or language"`
	Value string `json:"value" jsonschema:"the new value"`
}

// applied is what Apply returns and Undo receives.
type applied struct {
	Previous string `json:"previous"`
}

type settingsOutput struct {
	Settings map[string]string `json:"settings"`
}

func main() {
	s := &store{settings: map[string]string{"theme": "light", "language": "en"}}
	serve.Main(serve.Program{
		Name: "settings",
		About: `An MCP server with two in-memory settings, theme and language.
Tools: preview_set_setting, apply_change, undo_change, get_change_status,
get_settings.`,
		Setup: func(server *mcp.Server, guard *changeset.Guard, _ *slog.Logger) error {
			register(server, guard, s)
			return nil
		},
	})
}

// register adds the guarded set_setting and the read tool get_settings.
func register(server *mcp.Server, guard *changeset.Guard, s *store) {
	changeset.Register(guard, &mcp.Tool{Name: "set_setting", Description: "Change a setting."},
		changeset.Operation[setting, setting, applied]{
			Preview: func(ctx context.Context, in setting) (changeset.Proposal[setting], error) {
				current, ok := s.get(in.Key)
				if !ok {
					return changeset.Proposal[setting]{}, changeset.Refuse("unknown setting %q (known: theme, language)", in.Key)
				}
				return changeset.Proposal[setting]{
					Payload: in,
					Diff:    changeset.DiffFields(map[string]any{in.Key: current}, map[string]any{in.Key: in.Value}),
					Summary: fmt.Sprintf("Set %s to %q", in.Key, in.Value),
				}, nil
			},
			Apply: func(ctx context.Context, p setting) (applied, error) {
				return applied{Previous: s.set(p.Key, p.Value)}, nil
			},
			Undo: func(ctx context.Context, p setting, r applied) error {
				s.set(p.Key, r.Previous)
				return nil
			},
			Observe: func(ctx context.Context, p setting) (any, error) {
				v, _ := s.get(p.Key)
				return v, nil
			},
		})

	mcp.AddTool(server, &mcp.Tool{
		Name:        "get_settings",
		Description: "Read every setting.",
		Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true},
	}, func(ctx context.Context, req *mcp.CallToolRequest, _ struct{}) (*mcp.CallToolResult, settingsOutput, error) {
		return nil, settingsOutput{Settings: s.snapshot()}, nil
	})
}
