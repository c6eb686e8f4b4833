package changesettest_test

import (
	"context"
	"fmt"
	"sync"
	"testing"

	changeset "github.com/mcp-changeset/changeset-go"
	"github.com/mcp-changeset/changeset-go/changesettest"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// settings is the state the operation changes. A real server would keep
// it in a database.
type settings struct {
	mu sync.Mutex
	m  map[string]string
}

func (s *settings) get(key string) (string, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	v, ok := s.m[key]
	return v, ok
}

func (s *settings) set(key, value string) (previous string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	previous, s.m[key] = s.m[key], value
	return previous
}

type setting struct {
	Key   string `json:"key"`
	Value string `json:"value"`
}

type applied struct {
	Previous string `json:"previous"`
}

// register is the server's own register function, which main calls too.
func register(server *mcp.Server, guard *changeset.Guard, s *settings) {
	op := changeset.Operation[setting, setting, applied]{
		Preview: func(ctx context.Context, in setting) (*changeset.Proposal[setting], error) {
			current, ok := s.get(in.Key)
			if !ok {
				return nil, changeset.Refuse("unknown setting %q", in.Key)
			}
			return &changeset.Proposal[setting]{
				Payload: in,
				Diff:    changeset.DiffFields(map[string]any{in.Key: current}, map[string]any{in.Key: in.Value}),
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
	}
	changeset.Register(guard, &mcp.Tool{Name: "set_setting", Description: "Change a setting."}, op)
}

// testSetSetting is a test of set_setting. In your own package it is
// func TestSetSetting(t *testing.T).
func testSetSetting(t testing.TB) {
	s := &settings{m: map[string]string{"theme": "light", "language": "en"}}
	g := changesettest.NewGuard(t, changeset.Options{})
	register(g.Server, g.Guard, s)

	// Preview, apply and undo each input through the real tools, and fail
	// the test if the undo does not restore the setting, if an apply goes
	// through after the setting changed, or if a preview writes.
	changesettest.CheckOperation(t, g, "set_setting",
		setting{Key: "theme", Value: "dark"},
		setting{Key: "language", Value: "fr"},
	)

	// The same tools, one call at a time, as an agent makes them.
	p, err := g.Preview("set_setting", setting{Key: "theme", Value: "dark"})
	if err != nil {
		t.Fatal(err)
	}
	fmt.Printf("%s %s → %s\n", p.Diff[0].Field, p.Diff[0].Before, p.Diff[0].After) // the values' JSON text
	if _, err := g.Apply(p); err != nil {
		t.Fatal(err)
	}
	theme, _ := s.get("theme")
	fmt.Println("theme:", theme)

	// A refusal is a *changesettest.ToolError, with the agent's text.
	_, err = g.Preview("set_setting", setting{Key: "colour", Value: "red"})
	fmt.Println(err)
}

func ExampleCheckOperation() {
	// A test passes its *testing.T to testSetSetting. An example has
	// none, so this one lends it a *testing.B's, which works the same way
	// (and runs the test's cleanups when it returns).
	failed := true
	testing.Benchmark(func(b *testing.B) {
		defer func() { failed = b.Failed() }()
		testSetSetting(b)
		b.SkipNow() // run once, measure nothing
	})
	fmt.Println("failed:", failed)
	// Output:
	// theme "light" → "dark"
	// theme: dark
	// preview_set_setting: unknown setting "colour"
	// failed: false
}
