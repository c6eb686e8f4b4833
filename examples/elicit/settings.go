// The settings example's resource and its tools, copied here so that this
// folder stands alone: two in-memory settings, theme and language, with
// the guarded operation set_setting and the read tool get_settings.

package main

import (
	"context"
	"fmt"
	"maps"
	"sync"

	changeset "github.com/mcp-changeset/changeset-go"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// store holds the settings. A real server would keep them in a database.
type store struct {
	mu       sync.Mutex
	settings map[string]string
}

// newStore returns the settings as they start: theme light, language en.
func newStore() *store {
	return &store{settings: map[string]string{"theme": "light", "language": "en"}}
}

// Get returns a setting and whether it exists.
func (s *store) Get(key string) (string, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	v, ok := s.settings[key]
	return v, ok
}

// Set changes a setting and returns its previous value.
func (s *store) Set(key, value string) (previous string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	previous = s.settings[key]
	s.settings[key] = value
	return previous
}

// Snapshot returns a copy of every setting.
func (s *store) Snapshot() map[string]string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return maps.Clone(s.settings)
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

// register adds the guarded set_setting to guard and the read tool
// get_settings to server.
func register(server *mcp.Server, guard *changeset.Guard, s *store) {
	changeset.Register(guard, &mcp.Tool{Name: "set_setting", Description: "Change a setting."},
		changeset.Operation[setting, setting, applied]{
			Preview: func(ctx context.Context, in setting) (*changeset.Proposal[setting], error) {
				current, ok := s.Get(in.Key)
				if !ok {
					return nil, changeset.Refuse("unknown setting %q (known: theme, language)", in.Key)
				}
				return &changeset.Proposal[setting]{
					Payload: in,
					Diff:    changeset.DiffFields(map[string]any{in.Key: current}, map[string]any{in.Key: in.Value}),
					Summary: fmt.Sprintf("Set %s to %s", in.Key, changeset.Quote(in.Value)),
				}, nil
			},
			Apply: func(ctx context.Context, p setting) (applied, error) {
				return applied{Previous: s.Set(p.Key, p.Value)}, nil
			},
			Undo: func(ctx context.Context, p setting, r applied) error {
				s.Set(p.Key, r.Previous)
				return nil
			},
			Observe: func(ctx context.Context, p setting) (any, error) {
				v, _ := s.Get(p.Key)
				return v, nil
			},
		})

	mcp.AddTool(server, &mcp.Tool{
		Name:        "get_settings",
		Description: "Read every setting.",
		Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true},
	}, func(ctx context.Context, req *mcp.CallToolRequest, _ struct{}) (*mcp.CallToolResult, settingsOutput, error) {
		return nil, settingsOutput{Settings: s.Snapshot()}, nil
	})
}
