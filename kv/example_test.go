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
