// The flags' tools: create_flag, update_flag and delete_flag, guarded
// through the key-value adapter, and the read tool list_flags.

package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"regexp"
	"slices"

	changeset "github.com/mcp-changeset/changeset-go"
	"github.com/mcp-changeset/changeset-go/kv"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Flag is a feature flag as the file holds it, under its name.
type Flag struct {
	Enabled     bool   `json:"enabled"`
	Rollout     int    `json:"rollout"`
	Description string `json:"description"`
}

// The tools' inputs and list_flags' output.
type (
	createInput struct {
		Name        string `json:"name" jsonschema:"the flag's name: lower-case letters, digits, - and _, starting with a letter"`
		Enabled     bool   `json:"enabled" jsonschema:"whether the flag is on"`
		Rollout     int    `json:"rollout" jsonschema:"the percentage of users who get the flag, 0 to 100"`
		Description string `json:"description,omitempty" jsonschema:"what the flag is for"`
	}
	updateInput struct {
		Name        string  `json:"name" jsonschema:"the flag to change"`
		Enabled     *bool   `json:"enabled,omitempty" jsonschema:"whether the flag is on (unchanged if left out)"`
		Rollout     *int    `json:"rollout,omitempty" jsonschema:"the percentage of users, 0 to 100 (unchanged if left out)"`
		Description *string `json:"description,omitempty" jsonschema:"what the flag is for (unchanged if left out)"`
	}
	nameInput struct {
		Name string `json:"name" jsonschema:"the flag to delete"`
	}
	listed struct {
		Name        string `json:"name"`
		Enabled     bool   `json:"enabled"`
		Rollout     int    `json:"rollout"`
		Description string `json:"description"`
	}
	listOutput struct {
		Flags []listed `json:"flags"`
	}
)

var validName = regexp.MustCompile(`^[a-z][a-z0-9_-]{0,63}$`)

// check refuses a name or a rollout that the file must not hold.
func check(name string, f Flag) error {
	if !validName.MatchString(name) {
		return changeset.Refuse("the flag name %q is not valid: use 1 to 64 lower-case letters, digits, - and _, starting with a letter", name)
	}
	if f.Rollout < 0 || f.Rollout > 100 {
		return changeset.Refuse("rollout %d is not a percentage (0 to 100)", f.Rollout)
	}
	return nil
}

// register adds the guarded operations to guard and list_flags to server.
func register(server *mcp.Server, guard *changeset.Guard, store *kv.JSONFile, log *slog.Logger) {
	flags := kv.Kind[Flag]{Name: "flag", Store: store}
	kv.Create(guard, &mcp.Tool{Name: "create_flag", Description: "Create a feature flag."}, flags,
		func(ctx context.Context, in createInput) (string, Flag, error) {
			f := Flag{Enabled: in.Enabled, Rollout: in.Rollout, Description: in.Description}
			return in.Name, f, check(in.Name, f)
		})
	kv.Update(guard, &mcp.Tool{Name: "update_flag", Description: "Change the fields given of a feature flag."}, flags,
		func(in updateInput) string { return in.Name },
		func(ctx context.Context, in updateInput, f Flag) (Flag, error) {
			if in.Enabled != nil {
				f.Enabled = *in.Enabled
			}
			if in.Rollout != nil {
				f.Rollout = *in.Rollout
			}
			if in.Description != nil {
				f.Description = *in.Description
			}
			return f, check(in.Name, f)
		})
	kv.Delete(guard, &mcp.Tool{Name: "delete_flag", Description: "Delete a feature flag."}, flags,
		func(in nameInput) string { return in.Name })

	mcp.AddTool(server, &mcp.Tool{Name: "list_flags", Description: "List the feature flags by name.",
		Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true}},
		func(ctx context.Context, req *mcp.CallToolRequest, _ struct{}) (*mcp.CallToolResult, listOutput, error) {
			all, err := store.All(ctx)
			if err != nil {
				log.Error("list_flags", "err", err)
				return nil, listOutput{}, errors.New("the flags file cannot be read (the server's log says why)")
			}
			out := listOutput{Flags: []listed{}}
			for _, name := range slices.Sorted(maps.Keys(all)) {
				var f Flag
				if err := json.Unmarshal(all[name], &f); err != nil {
					return nil, listOutput{}, fmt.Errorf("the flag %q cannot be read: %v", name, err)
				}
				out.Flags = append(out.Flags, listed{name, f.Enabled, f.Rollout, f.Description})
			}
			return nil, out, nil
		})
}
