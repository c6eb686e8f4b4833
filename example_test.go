package changeset_test

import (
	"context"
	"fmt"
	"log"
	"os"
	"path/filepath"

	changeset "github.com/mcp-changeset/changeset-go"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Setting is the input of the example's operation and its stored payload.
type Setting struct {
	Key   string `json:"key"`
	Value string `json:"value"`
}

// Previous is what the example's Apply returns and its Undo receives.
type Previous struct {
	Value string `json:"previous"`
}

// Example shows the whole life of a guarded change through the Go API, as
// the MCP tools drive it for an agent: preview, apply with the confirmation
// token, a refused replay, and undo with the undo token.
func Example() {
	dir, _ := os.MkdirTemp("", "changeset-example-")
	defer os.RemoveAll(dir)
	settings := map[string]string{"theme": "light"}

	server := mcp.NewServer(&mcp.Implementation{Name: "settings", Version: "1.0.0"}, nil)
	guard, err := changeset.New(server, changeset.Options{
		LedgerPath: filepath.Join(dir, "ledger.db"),
		WriteMode:  changeset.WriteGuarded, // or MCP_CHANGESET_WRITE_MODE=guarded
	})
	if err != nil {
		log.Fatal(err)
	}
	defer guard.Close()

	changeset.Register(guard, &mcp.Tool{Name: "set_setting", Description: "Change a setting."},
		changeset.Operation[Setting, Setting, Previous]{
			Preview: func(ctx context.Context, in Setting) (*changeset.Proposal[Setting], error) {
				old, ok := settings[in.Key]
				if !ok {
					return nil, changeset.Refuse("unknown setting %q", in.Key)
				}
				return &changeset.Proposal[Setting]{
					Payload: in,
					Diff:    changeset.DiffFields(map[string]any{in.Key: old}, map[string]any{in.Key: in.Value}),
					Summary: fmt.Sprintf("Set %s to %q", in.Key, in.Value),
				}, nil
			},
			Apply: func(ctx context.Context, p Setting) (Previous, error) {
				old := settings[p.Key]
				settings[p.Key] = p.Value
				return Previous{Value: old}, nil
			},
			Undo: func(ctx context.Context, p Setting, r Previous) error {
				settings[p.Key] = r.Value
				return nil
			},
			Observe: func(ctx context.Context, p Setting) (any, error) { return settings[p.Key], nil },
		})

	ctx := context.Background()
	p, err := guard.Preview(ctx, "set_setting", Setting{Key: "theme", Value: "dark"})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("%s: %s; diff %s: %s → %s\n", p.Status, p.Summary, p.Diff[0].Field, p.Diff[0].Before, p.Diff[0].After)

	a, err := guard.Apply(ctx, p.ChangeID, p.ConfirmationToken)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(a.Status, "theme is now", settings["theme"])

	_, err = guard.Apply(ctx, p.ChangeID, p.ConfirmationToken)
	fmt.Println("replay refused:", err != nil)

	if _, err := guard.Undo(ctx, p.ChangeID, a.UndoToken); err != nil {
		log.Fatal(err)
	}
	st, _ := guard.Status(ctx, p.ChangeID)
	fmt.Println(st.Status, "theme is back to", settings["theme"])

	// Output:
	// preview: Set theme to "dark"; diff theme: "light" → "dark"
	// applied theme is now dark
	// replay refused: true
	// undone theme is back to light
}

// ExampleDiffFields shows the diff of two flat maps: one entry per key
// whose value differs, sorted by key.
func ExampleDiffFields() {
	diff := changeset.DiffFields(
		map[string]any{"theme": "light", "language": "en", "beta": true},
		map[string]any{"theme": "dark", "language": "en", "font": "serif"},
	)
	for _, d := range diff {
		fmt.Printf("%s: %v → %v\n", d.Field, d.Before, d.After)
	}
	// Output:
	// beta: true → <nil>
	// font: <nil> → serif
	// theme: light → dark
}
