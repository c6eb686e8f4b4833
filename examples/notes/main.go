// Command notes is an MCP server that keeps notes as plain files in one
// directory and guards its two writes, write_note and delete_note.
//
// It shows how to guard writes to something outside the ledger (here, the
// file system): each change is bound to the note's content hash through
// Observe, so an apply is refused if the file changed after the preview and
// an undo is refused if the file changed after the apply. Apply writes
// atomically (a temporary file, fsync, rename) and returns the previous
// content, which Undo puts back (or Undo removes a note the change
// created). Names are checked strictly, every access is confined to the
// directory with os.Root, and symbolic links are never followed.
//
//	mkdir -p ~/notes
//	MCP_CHANGESET_WRITE_MODE=guarded go run ./examples/notes --root ~/notes
//
// Tools: preview_write_note, preview_delete_note, apply_change,
// undo_change, get_change_status, list_notes, read_note. See --help for
// the flags every example shares (--ledger, --http, --auth-token-file).
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"unicode/utf8"

	changeset "github.com/mcp-changeset/changeset-go"
	_ "github.com/mcp-changeset/changeset-go/ledger/postgres" // --ledger postgres://…
	"github.com/mcp-changeset/changeset-go/serve"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

func main() {
	var rootDir string
	serve.Main(serve.Program{
		Name:     "notes",
		Synopsis: "--root DIR [flags]",
		About: `An MCP server that keeps notes as files in DIR. Every write is previewed
first and applied only with the preview's confirmation token; every applied
write can be undone unless the note changed since.
Tools: preview_write_note, preview_delete_note, apply_change, undo_change,
get_change_status, list_notes, read_note.`,
		Flags: func(fs *flag.FlagSet) {
			fs.StringVar(&rootDir, "root", "", "the `directory` that holds the notes (required; it must exist)")
		},
		Check: func(f serve.Flags) error { return checkRoot(rootDir, f.Ledger) },
		Setup: func(server *mcp.Server, guard *changeset.Guard, log *slog.Logger) error {
			root, err := os.OpenRoot(rootDir)
			if err != nil {
				return err
			}
			register(server, guard, &store{root: root}, log)
			return nil
		},
	})
}

// checkRoot requires an existing directory that does not hold the ledger:
// a note could otherwise overwrite it.
func checkRoot(dir, ledgerPath string) error {
	if dir == "" {
		return errors.New("--root is required: the directory that holds the notes")
	}
	fi, err := os.Stat(dir)
	if err != nil || !fi.IsDir() {
		return fmt.Errorf("--root %s is not a directory (create it first)", dir)
	}
	absRoot, err1 := filepath.Abs(dir)
	absLedger, err2 := filepath.Abs(ledgerPath)
	if err1 != nil || err2 != nil {
		return errors.Join(err1, err2)
	}
	if resolved, err := filepath.EvalSymlinks(absRoot); err == nil {
		absRoot = resolved
	}
	if resolved, err := filepath.EvalSymlinks(filepath.Dir(absLedger)); err == nil {
		absLedger = filepath.Join(resolved, filepath.Base(absLedger))
	}
	if rel, err := filepath.Rel(absRoot, absLedger); err == nil && !strings.HasPrefix(rel, "..") {
		return fmt.Errorf("--ledger %s lies inside --root %s, where a note could overwrite it; keep it elsewhere", ledgerPath, dir)
	}
	return nil
}

// The tools' inputs, the stored payloads and what Apply returns.
type (
	writeInput struct {
		Name    string `json:"name" jsonschema:"the note's file name, e.g. todo.txt (no directories, not hidden)"`
		Content string `json:"content" jsonschema:"the note's new content (UTF-8 text, at most 32 KiB)"`
	}
	deleteInput struct {
		Name string `json:"name" jsonschema:"the note's file name"`
	}
	// writePayload is what write_note stores. ExpectedSHA256 is the hash
	// of the content the preview saw ("" when there was no note): Apply
	// compares it again, under a lock, right before it writes.
	writePayload struct {
		Name           string `json:"name"`
		Content        string `json:"content"`
		ExpectedSHA256 string `json:"expected_sha256"`
	}
	deletePayload struct {
		Name           string `json:"name"`
		ExpectedSHA256 string `json:"expected_sha256"`
	}
	// previous is what an apply replaced: Undo puts it back.
	previous struct {
		Existed bool   `json:"existed"`
		Content string `json:"previous"`
	}
)

// register adds the guarded operations and the read tools.
func register(server *mcp.Server, guard *changeset.Guard, s *store, log *slog.Logger) {
	observe := func(name string) (any, error) {
		st, err := s.observe(name)
		if st == nil || err != nil {
			return nil, err // a nil *noteState would encode the same, but say it plainly
		}
		return st, nil
	}

	changeset.Register(guard, &mcp.Tool{Name: "write_note", Description: "Create a note or replace its content."},
		changeset.Operation[writeInput, writePayload, previous]{
			Preview: func(ctx context.Context, in writeInput) (*changeset.Proposal[writePayload], error) {
				if err := checkName(in.Name); err != nil {
					return nil, err
				}
				if len(in.Content) > maxContentBytes {
					return nil, changeset.Refuse(
						"the content is %d bytes; a note holds at most %d bytes (32 KiB)", len(in.Content), maxContentBytes)
				}
				old, existed, err := s.current(in.Name)
				if err != nil {
					return nil, err
				}
				p := writePayload{Name: in.Name, Content: in.Content}
				before := map[string]any{}
				summary := fmt.Sprintf("Create note %s (%s)", changeset.Quote(in.Name), byteCount(len(in.Content)))
				if existed {
					if string(old) == in.Content {
						return nil, changeset.Refuse("the note %q already has this content; nothing to change", in.Name)
					}
					p.ExpectedSHA256 = digest(old)
					before["content"] = string(old)
					summary = fmt.Sprintf("Replace note %s (%s → %s)", changeset.Quote(in.Name), byteCount(len(old)), byteCount(len(in.Content)))
				}
				return &changeset.Proposal[writePayload]{
					Payload:  p,
					Diff:     changeset.DiffFields(before, map[string]any{"content": in.Content}),
					Summary:  summary,
					Resource: "note:" + in.Name,
				}, nil
			},
			Apply: func(ctx context.Context, p writePayload) (previous, error) {
				old, existed, err := s.compareAndSwap(p.Name, p.ExpectedSHA256, func(bool) error {
					return s.writeFile(p.Name, []byte(p.Content))
				})
				return previous{Existed: existed, Content: string(old)}, err
			},
			Undo: func(ctx context.Context, p writePayload, r previous) error {
				_, _, err := s.compareAndSwap(p.Name, digest([]byte(p.Content)), func(bool) error {
					if r.Existed {
						return s.writeFile(p.Name, []byte(r.Content))
					}
					return s.remove(p.Name)
				})
				return err
			},
			Observe: func(ctx context.Context, p writePayload) (any, error) { return observe(p.Name) },
		})

	changeset.Register(guard, &mcp.Tool{Name: "delete_note", Description: "Delete a note."},
		changeset.Operation[deleteInput, deletePayload, previous]{
			Preview: func(ctx context.Context, in deleteInput) (*changeset.Proposal[deletePayload], error) {
				if err := checkName(in.Name); err != nil {
					return nil, err
				}
				old, existed, err := s.current(in.Name)
				if err != nil {
					return nil, err
				}
				if !existed {
					return nil, changeset.Refuse("the note %q does not exist", in.Name)
				}
				return &changeset.Proposal[deletePayload]{
					Payload:  deletePayload{Name: in.Name, ExpectedSHA256: digest(old)},
					Diff:     changeset.DiffFields(map[string]any{"content": string(old)}, nil),
					Summary:  fmt.Sprintf("Delete note %s (%s)", changeset.Quote(in.Name), byteCount(len(old))),
					Resource: "note:" + in.Name,
				}, nil
			},
			Apply: func(ctx context.Context, p deletePayload) (previous, error) {
				old, existed, err := s.compareAndSwap(p.Name, p.ExpectedSHA256, func(bool) error {
					return s.remove(p.Name)
				})
				return previous{Existed: existed, Content: string(old)}, err
			},
			Undo: func(ctx context.Context, p deletePayload, r previous) error {
				_, _, err := s.compareAndSwap(p.Name, "", func(bool) error {
					return s.writeFile(p.Name, []byte(r.Content))
				})
				return err
			},
			Observe: func(ctx context.Context, p deletePayload) (any, error) { return observe(p.Name) },
		})

	addReadTools(server, s, log)
}

type (
	listOutput struct {
		Notes []noteInfo `json:"notes"`
	}
	readInput struct {
		Name string `json:"name" jsonschema:"the note's file name"`
	}
	readOutput struct {
		Name    string `json:"name"`
		Content string `json:"content"`
		SHA256  string `json:"sha256"`
	}
)

// addReadTools adds list_notes and read_note. Their errors name the note,
// never the directory's path.
func addReadTools(server *mcp.Server, s *store, log *slog.Logger) {
	mcp.AddTool(server, &mcp.Tool{
		Name:        "list_notes",
		Description: "List the notes: name, size in bytes and SHA-256 of the content.",
		Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true},
	}, func(ctx context.Context, req *mcp.CallToolRequest, _ struct{}) (*mcp.CallToolResult, listOutput, error) {
		notes, err := s.list()
		if err != nil {
			log.Error("list_notes", "err", err)
			return nil, listOutput{}, errors.New("the notes directory cannot be read")
		}
		return nil, listOutput{Notes: notes}, nil
	})

	mcp.AddTool(server, &mcp.Tool{
		Name:        "read_note",
		Description: "Read a note's content.",
		Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true},
	}, func(ctx context.Context, req *mcp.CallToolRequest, in readInput) (*mcp.CallToolResult, readOutput, error) {
		if err := checkName(in.Name); err != nil {
			return nil, readOutput{}, err
		}
		data, _, err := s.read(in.Name, maxReadBytes)
		var nf *notFile
		var tl *tooLarge
		switch {
		case errors.Is(err, fs.ErrNotExist):
			return nil, readOutput{}, fmt.Errorf("the note %q does not exist", in.Name)
		case errors.As(err, &nf), errors.As(err, &tl):
			return nil, readOutput{}, fmt.Errorf("the note %s", err.Error())
		case err != nil:
			log.Error("read_note", "note", in.Name, "err", err)
			return nil, readOutput{}, fmt.Errorf("the note %q cannot be read", in.Name)
		case !utf8.Valid(data):
			return nil, readOutput{}, fmt.Errorf("the note %q holds bytes that are not UTF-8 text", in.Name)
		}
		return nil, readOutput{Name: in.Name, Content: string(data), SHA256: digest(data)}, nil
	})
}

// byteCount says how many bytes a note holds, for a summary.
func byteCount(n int) string {
	if n == 1 {
		return "1 byte"
	}
	return fmt.Sprintf("%d bytes", n)
}
