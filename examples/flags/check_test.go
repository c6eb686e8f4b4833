package main

import (
	"log/slog"
	"path/filepath"
	"testing"

	changeset "github.com/mcp-changeset/changeset-go"
	"github.com/mcp-changeset/changeset-go/changesettest"
	"github.com/mcp-changeset/changeset-go/kv"
)

// TestCheckOperation_Flags checks create_flag, update_flag and
// delete_flag in process, registered by the example's own register
// function on a file in a temporary directory.
func TestCheckOperation_Flags(t *testing.T) {
	path := filepath.Join(t.TempDir(), "flags.json")
	write(t, path, `{"beta": {"enabled": true, "rollout": 10, "description": "the new editor"}}`)
	before := read(t, path)

	g := changesettest.NewGuard(t, changeset.Options{})
	register(g.Server, g.Guard, kv.NewJSONFile(path), slog.New(slog.DiscardHandler))

	changesettest.CheckOperation(t, g, "create_flag",
		createInput{Name: "dark-mode", Enabled: true, Rollout: 50, Description: "dark theme"},
		createInput{Name: "off", Rollout: 0},
	)
	on, full, text := false, 100, "the newer editor"
	changesettest.CheckOperation(t, g, "update_flag",
		updateInput{Name: "beta", Enabled: &on},
		updateInput{Name: "beta", Rollout: &full, Description: &text},
	)
	changesettest.CheckOperation(t, g, "delete_flag", nameInput{Name: "beta"})

	var out listOutput
	if err := g.Call("list_flags", nil, &out); err != nil {
		t.Fatal(err)
	}
	if len(out.Flags) != 1 || out.Flags[0] != (listed{"beta", true, 10, "the new editor"}) {
		t.Errorf("after the checks list_flags gives %+v, want beta as it was (the file held %s)", out.Flags, before)
	}
}
