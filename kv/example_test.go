package kv_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"

	changeset "github.com/mcp-changeset/changeset-go"
	"github.com/mcp-changeset/changeset-go/kv"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Feature flags in a JSON file, with guarded create, update and delete
// tools. The Go API stands in for the agent here: over MCP the same steps
// are preview_create_flag, apply_change and undo_change.
func Example() {
	type Flag struct {
		Enabled bool `json:"enabled"`
		Rollout int  `json:"rollout"`
	}
	type CreateIn struct {
		Name    string `json:"name"`
		Enabled bool   `json:"enabled"`
	}
	type NameIn struct {
		Name string `json:"name"`
	}

	dir, _ := os.MkdirTemp("", "flags")
	defer os.RemoveAll(dir)
	server := mcp.NewServer(&mcp.Implementation{Name: "flags", Version: "1"}, nil)
	guard, err := changeset.New(server, changeset.Options{
		LedgerPath: filepath.Join(dir, "ledger.db"), WriteMode: changeset.WriteGuarded})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer guard.Close()

	flags := kv.Kind[Flag]{Name: "flag", Store: kv.NewJSONFile(filepath.Join(dir, "flags.json"))}
	kv.Create(guard, &mcp.Tool{Name: "create_flag", Description: "Create a feature flag."}, flags,
		func(ctx context.Context, in CreateIn) (string, Flag, error) {
			return in.Name, Flag{Enabled: in.Enabled}, nil
		})
	kv.Delete(guard, &mcp.Tool{Name: "delete_flag", Description: "Delete a feature flag."}, flags,
		func(in NameIn) string { return in.Name })

	ctx := context.Background()
	p, _ := guard.Preview(ctx, "create_flag", CreateIn{Name: "beta", Enabled: true})
	fmt.Println(p.Summary)
	a, _ := guard.Apply(ctx, p.ChangeID, p.ConfirmationToken)
	data, _ := os.ReadFile(filepath.Join(dir, "flags.json"))
	fmt.Print(string(data))

	_, err = guard.Preview(ctx, "create_flag", CreateIn{Name: "beta"})
	fmt.Println(err)

	guard.Undo(ctx, a.ChangeID, a.UndoToken)
	data, _ = os.ReadFile(filepath.Join(dir, "flags.json"))
	fmt.Print(string(data))
	// Output:
	// Create flag beta
	// {
	//   "beta": {
	//     "enabled": true,
	//     "rollout": 0
	//   }
	// }
	// flag "beta" already exists; update or delete it instead
	// {}
}

// Store settings in a JSON file, several set in one change: the preview
// names each key that changes, the apply writes them in one rewrite of the
// file, and the undo puts every one back.
func ExampleSetMany() {
	type SettingsIn struct {
		Currency string  `json:"currency"`
		TaxRate  float64 `json:"tax_rate"`
	}

	dir, _ := os.MkdirTemp("", "settings")
	defer os.RemoveAll(dir)
	file := filepath.Join(dir, "settings.json")
	os.WriteFile(file, []byte("{\n  \"currency\": \"USD\",\n  \"tax_rate\": 0.2\n}\n"), 0o644)
	server := mcp.NewServer(&mcp.Implementation{Name: "shop", Version: "1"}, nil)
	guard, err := changeset.New(server, changeset.Options{
		LedgerPath: filepath.Join(dir, "ledger.db"), WriteMode: changeset.WriteGuarded})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer guard.Close()

	settings := kv.Kind[any]{Name: "setting", Store: kv.NewJSONFile(file)}
	kv.SetMany(guard, &mcp.Tool{Name: "set_settings", Description: "Set the store's currency and tax rate."}, settings,
		func(ctx context.Context, in SettingsIn) (map[string]any, error) {
			if in.TaxRate < 0 || in.TaxRate >= 1 {
				return nil, changeset.Refuse("tax_rate %v is outside [0, 1)", in.TaxRate)
			}
			return map[string]any{"currency": in.Currency, "tax_rate": in.TaxRate}, nil
		})

	ctx := context.Background()
	p, _ := guard.Preview(ctx, "set_settings", SettingsIn{Currency: "EUR", TaxRate: 0.25})
	fmt.Println(p.Summary)
	for _, d := range p.Diff {
		fmt.Printf("%s: %s -> %s\n", d.Field, d.Before, d.After)
	}
	a, _ := guard.Apply(ctx, p.ChangeID, p.ConfirmationToken)
	data, _ := os.ReadFile(file)
	fmt.Print(string(data))

	guard.Undo(ctx, a.ChangeID, a.UndoToken)
	data, _ = os.ReadFile(file)
	fmt.Print(string(data))
	// Output:
	// Set setting currency, tax_rate
	// currency: "USD" -> "EUR"
	// tax_rate: 0.2 -> 0.25
	// {
	//   "currency": "EUR",
	//   "tax_rate": 0.25
	// }
	// {
	//   "currency": "USD",
	//   "tax_rate": 0.2
	// }
}
