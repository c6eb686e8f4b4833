// Command plain is examples/flags without the guard: the same tools, written
// with plain mcp.AddTool, writing the file at once. It is kept to measure
// what guarding costs in lines of tool code (see lines_test.go); it shares
// the file store, kv.JSONFile, with the guarded server. Being under
// testdata, it is not part of the example's build.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"maps"
	"os"
	"regexp"
	"slices"

	"github.com/mcp-changeset/changeset-go/kv"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

func main() {
	file := flag.String("file", "", "the JSON `file` that holds the flags (required; created by the first write)")
	flag.Parse()
	if *file == "" {
		fmt.Fprintln(os.Stderr, "--file is required: the JSON file that holds the flags")
		os.Exit(2)
	}
	log := slog.New(slog.NewTextHandler(os.Stderr, nil))
	server := mcp.NewServer(&mcp.Implementation{Name: "flags", Version: "1.0.0"}, nil)
	register(server, kv.NewJSONFile(*file), log)
	if err := server.Run(context.Background(), &mcp.StdioTransport{}); err != nil {
		log.Error("serve", "err", err)
		os.Exit(1)
	}
}

// Flag is a feature flag as the file holds it, under its name.
type Flag struct {
	Enabled     bool   `json:"enabled"`
	Rollout     int    `json:"rollout"`
	Description string `json:"description"`
}

// The tools' inputs and outputs.
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
		return fmt.Errorf("the flag name %q is not valid: use 1 to 64 lower-case letters, digits, - and _, starting with a letter", name)
	}
	if f.Rollout < 0 || f.Rollout > 100 {
		return fmt.Errorf("rollout %d is not a percentage (0 to 100)", f.Rollout)
	}
	return nil
}

// current reads a flag: its stored JSON (nil if there is none) and value.
func current(ctx context.Context, store *kv.JSONFile, name string) (json.RawMessage, Flag, error) {
	var f Flag
	raw, err := store.Get(ctx, name)
	if err == nil && raw != nil {
		err = json.Unmarshal(raw, &f)
	}
	return raw, f, err
}

// write sets a flag from prev (nil: absent) to f (nil: deleted).
func write(ctx context.Context, store *kv.JSONFile, name string, prev json.RawMessage, f *Flag) (*mcp.CallToolResult, listed, error) {
	var next json.RawMessage
	if f != nil {
		next, _ = json.Marshal(f)
	}
	if err := store.Swap(ctx, name, prev, next); err != nil {
		return nil, listed{}, err
	}
	if f == nil {
		return nil, listed{Name: name}, nil
	}
	return nil, listed{name, f.Enabled, f.Rollout, f.Description}, nil
}

// register adds the tools to server.
func register(server *mcp.Server, store *kv.JSONFile, log *slog.Logger) {
	mcp.AddTool(server, &mcp.Tool{Name: "create_flag", Description: "Create a feature flag."},
		func(ctx context.Context, req *mcp.CallToolRequest, in createInput) (*mcp.CallToolResult, listed, error) {
			f := Flag{Enabled: in.Enabled, Rollout: in.Rollout, Description: in.Description}
			if err := check(in.Name, f); err != nil {
				return nil, listed{}, err
			}
			raw, _, err := current(ctx, store, in.Name)
			if err != nil {
				return nil, listed{}, err
			}
			if raw != nil {
				return nil, listed{}, fmt.Errorf("flag %q already exists; update or delete it instead", in.Name)
			}
			return write(ctx, store, in.Name, nil, &f)
		})
	mcp.AddTool(server, &mcp.Tool{Name: "update_flag", Description: "Change the fields given of a feature flag."},
		func(ctx context.Context, req *mcp.CallToolRequest, in updateInput) (*mcp.CallToolResult, listed, error) {
			raw, f, err := current(ctx, store, in.Name)
			if err != nil {
				return nil, listed{}, err
			}
			if raw == nil {
				return nil, listed{}, fmt.Errorf("there is no flag %q", in.Name)
			}
			old := f
			if in.Enabled != nil {
				f.Enabled = *in.Enabled
			}
			if in.Rollout != nil {
				f.Rollout = *in.Rollout
			}
			if in.Description != nil {
				f.Description = *in.Description
			}
			if err := check(in.Name, f); err != nil {
				return nil, listed{}, err
			}
			if f == old {
				return nil, listed{}, fmt.Errorf("flag %q already holds this value; nothing to change", in.Name)
			}
			return write(ctx, store, in.Name, raw, &f)
		})
	mcp.AddTool(server, &mcp.Tool{Name: "delete_flag", Description: "Delete a feature flag."},
		func(ctx context.Context, req *mcp.CallToolRequest, in nameInput) (*mcp.CallToolResult, listed, error) {
			raw, _, err := current(ctx, store, in.Name)
			if err != nil {
				return nil, listed{}, err
			}
			if raw == nil {
				return nil, listed{}, fmt.Errorf("there is no flag %q", in.Name)
			}
			return write(ctx, store, in.Name, raw, nil)
		})

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
