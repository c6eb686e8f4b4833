package changeset

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/google/jsonschema-go/jsonschema"
	"github.com/mcp-changeset/changeset-go/internal/pipeline"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Register adds a guarded operation to g under tool.Name (e.g.
// "set_setting") and, when g has a server, registers its preview tool
// "preview_<name>" (after the Prefix). The tool's input schema is inferred
// from In unless tool.InputSchema is set; an optional "run_id" property is
// added to it so that a preview can join a run.
//
// Like mcp.AddTool, Register panics on programming errors: a missing name
// or Preview, no Apply or ApplyTx (or both, or a mix of the two families;
// see [Operation]), a name registered twice, or an input type whose schema
// is not an object or already has a "run_id" property.
func Register[In, P, R any](g *Guard, tool *mcp.Tool, op Operation[In, P, R]) {
	if tool == nil || tool.Name == "" {
		panic("changeset.Register: the tool needs a name")
	}
	if problem := op.check(); problem != "" {
		panic(fmt.Sprintf("changeset.Register %q: %s", tool.Name, problem))
	}
	o := erase(tool.Name, tool.Description, op)
	n, err := g.approversFor(op.Approval, op.Approvers)
	if err != nil {
		panic(fmt.Sprintf("changeset.Register %q: %v", tool.Name, err))
	}
	o.Approvers = n
	g.register(tool, o, inputSchema[In])
}

// register adds a type-erased operation and its preview tool. schema
// infers the input schema when the tool has none.
func (g *Guard) register(tool *mcp.Tool, o *pipeline.Op, schema func() (*jsonschema.Schema, error)) {
	name := tool.Name
	if !g.pipe.Register(o) {
		panic(fmt.Sprintf("changeset.Register: operation %q registered twice", name))
	}
	if g.server == nil {
		return
	}

	in := tool.InputSchema
	if in == nil {
		s, err := schema()
		if err != nil {
			panic(fmt.Sprintf("changeset.Register %q: input schema: %v", name, err))
		}
		in = s
	}
	input, ok := in.(*jsonschema.Schema)
	if !ok || input.Type != "object" {
		panic(fmt.Sprintf("changeset.Register %q: the input schema must be a *jsonschema.Schema of type object", name))
	}
	input = input.CloneSchemas()
	if _, taken := input.Properties["run_id"]; taken {
		panic(fmt.Sprintf("changeset.Register %q: the input may not have its own run_id property", name))
	}
	if input.Properties == nil {
		input.Properties = map[string]*jsonschema.Schema{}
	}
	input.Properties["run_id"] = &jsonschema.Schema{Type: "string", Description: g.voice.RunIDParam()}

	desc := strings.TrimSpace(tool.Description)
	if desc != "" {
		desc += "\n\n"
	}
	desc += g.voice.PreviewTool()
	pt := &mcp.Tool{
		Name:         g.toolName("preview_" + name),
		Title:        tool.Title,
		Description:  desc,
		InputSchema:  input,
		OutputSchema: withApproval(outputSchema[PreviewResult](), o.Approvers > 0),
		Annotations:  &mcp.ToolAnnotations{ReadOnlyHint: true, OpenWorldHint: ptr(false)},
	}
	addTool(g, pt, func(ctx context.Context, req *mcp.CallToolRequest, args json.RawMessage) (*mcp.CallToolResult, *PreviewResult, error) {
		// The SDK decoded the arguments to validate them and encoded them
		// again, which rounds integers beyond 2^53; the client's own bytes
		// (checked by g.middleware) are what the preview must see.
		if raw := req.Params.Arguments; len(raw) > 0 {
			args = raw
		}
		res, err := g.preview(ctx, req, o, args)
		return nil, res, g.toolError(err)
	})
}

func ptr[T any](v T) *T { return &v }

// toolError turns an error into the tool error the agent reads: the message
// of the library's own error types, the Go type name of anything else. The
// full error goes to the log.
func (g *Guard) toolError(err error) error {
	if err == nil {
		return nil
	}
	text := agentText(err)
	if wd := (*WritesDisabledError)(nil); errors.As(err, &wd) { // in the Guard's voice, with the mode as it is now
		text = g.voice.WritesOff(wd.subject(), g.unknownWriteMode())
	}
	var ce *ChangeError
	if !errors.As(err, &ce) || ce.Err != nil {
		g.log.Warn("tool call failed", "err", err)
	}
	return errors.New(text)
}

// The shared tools' inputs.
type (
	applyInput struct {
		ChangeID          string `json:"change_id"`
		ConfirmationToken string `json:"confirmation_token"`
	}
	undoInput struct {
		ChangeID  string `json:"change_id"`
		UndoToken string `json:"undo_token"`
	}
	statusInput struct {
		ChangeID string `json:"change_id"`
	}
	startRunInput struct {
		Label string `json:"label" jsonschema:"the task, in a few words"`
	}
	getRunInput struct {
		RunID  string `json:"run_id"`
		Limit  int    `json:"limit,omitempty" jsonschema:"page size: default 100, at most 500"`
		Cursor string `json:"cursor,omitempty" jsonschema:"a next_cursor"`
	}
	listRunsInput struct {
		Status string `json:"status,omitempty" jsonschema:"open, undoing, undone or partially_undone"`
		Limit  int    `json:"limit,omitempty" jsonschema:"default 20, at most 100"`
	}
	listRunsOutput struct {
		Runs []RunInfo `json:"runs"` // newest first, as the tool's description says
	}
	undoRunInput struct {
		RunID             string `json:"run_id"`
		DryRun            *bool  `json:"dry_run,omitempty" jsonschema:"default true: report only"`
		ConfirmationToken string `json:"confirmation_token,omitempty" jsonschema:"from the dry run, for dry_run=false"`
	}
)

// addSharedTools registers apply_change, undo_change and get_change_status.
func (g *Guard) addSharedTools() {
	if g.opts.Approval == UserApproval {
		g.addApprovalChangeTools() // they ask the user through the client
	} else {
		addTool(g, &mcp.Tool{
			Name:         g.toolName("apply_change"),
			Description:  g.voice.ApplyTool(),
			OutputSchema: outputSchema[ApplyResult](),
			Annotations:  &mcp.ToolAnnotations{DestructiveHint: ptr(true), OpenWorldHint: ptr(false)},
		}, func(ctx context.Context, req *mcp.CallToolRequest, in applyInput) (*mcp.CallToolResult, *ApplyResult, error) {
			by, err := g.agentBy(ctx, req)
			if err != nil {
				return nil, nil, g.toolError(err)
			}
			res, err := g.apply(ctx, req, in.ChangeID, in.ConfirmationToken, pipeline.ByToken, by)
			return nil, res, g.toolError(err)
		})
		addTool(g, &mcp.Tool{
			Name:         g.toolName("undo_change"),
			Description:  g.voice.UndoTool(),
			OutputSchema: outputSchema[UndoResult](),
			Annotations:  &mcp.ToolAnnotations{DestructiveHint: ptr(true), OpenWorldHint: ptr(false)},
		}, func(ctx context.Context, req *mcp.CallToolRequest, in undoInput) (*mcp.CallToolResult, *UndoResult, error) {
			by, err := g.agentBy(ctx, req)
			if err != nil {
				return nil, nil, g.toolError(err)
			}
			res, err := g.undo(ctx, req, in.ChangeID, in.UndoToken, pipeline.ByToken, by)
			return nil, res, g.toolError(err)
		})
	}
	addTool(g, &mcp.Tool{
		Name:         g.toolName("get_change_status"),
		Description:  g.voice.StatusTool(),
		OutputSchema: withApproval(outputSchema[ChangeStatus](), g.opts.Approval == PersonApproval),
		Annotations:  &mcp.ToolAnnotations{ReadOnlyHint: true, OpenWorldHint: ptr(false)},
	}, func(ctx context.Context, req *mcp.CallToolRequest, in statusInput) (*mcp.CallToolResult, *ChangeStatus, error) {
		res, err := g.status(ctx, req, in.ChangeID)
		return nil, res, g.toolError(err)
	})
}

// addRunTools registers start_run, get_run, list_runs and undo_run.
func (g *Guard) addRunTools() {
	addTool(g, &mcp.Tool{
		Name:         g.toolName("start_run"),
		Description:  g.voice.StartRunTool(),
		OutputSchema: outputSchema[RunInfo](),
		Annotations:  &mcp.ToolAnnotations{DestructiveHint: ptr(false), OpenWorldHint: ptr(false)},
	}, func(ctx context.Context, req *mcp.CallToolRequest, in startRunInput) (*mcp.CallToolResult, *RunInfo, error) {
		res, err := g.startRun(ctx, req, in.Label)
		return nil, res, g.toolError(err)
	})
	addTool(g, &mcp.Tool{
		Name:         g.toolName("get_run"),
		Description:  g.voice.GetRunTool(),
		OutputSchema: outputSchema[RunDetail](),
		Annotations:  &mcp.ToolAnnotations{ReadOnlyHint: true, OpenWorldHint: ptr(false)},
	}, func(ctx context.Context, req *mcp.CallToolRequest, in getRunInput) (*mcp.CallToolResult, *RunDetail, error) {
		res, err := g.runDetail(ctx, req, in.RunID, RunPage{Limit: in.Limit, Cursor: in.Cursor})
		return nil, res, g.toolError(err)
	})
	addTool(g, &mcp.Tool{
		Name:         g.toolName("list_runs"),
		Description:  g.voice.ListRunsTool(),
		OutputSchema: outputSchema[listRunsOutput](),
		Annotations:  &mcp.ToolAnnotations{ReadOnlyHint: true, OpenWorldHint: ptr(false)},
	}, func(ctx context.Context, req *mcp.CallToolRequest, in listRunsInput) (*mcp.CallToolResult, *listRunsOutput, error) {
		runs, err := g.listRuns(ctx, req, in.Status, in.Limit)
		if err != nil {
			return nil, nil, g.toolError(err)
		}
		return nil, &listRunsOutput{Runs: runs}, nil
	})
	if g.opts.Approval == UserApproval {
		g.addApprovalUndoRun() // the real undo asks the user through the client
		return
	}
	addTool(g, &mcp.Tool{
		Name:         g.toolName("undo_run"),
		Description:  g.voice.UndoRunTool(),
		OutputSchema: withApproval(outputSchema[RunReport](), g.opts.Approval == PersonApproval),
		Annotations:  &mcp.ToolAnnotations{DestructiveHint: ptr(true), OpenWorldHint: ptr(false)},
	}, func(ctx context.Context, req *mcp.CallToolRequest, in undoRunInput) (*mcp.CallToolResult, *RunReport, error) {
		dryRun := in.DryRun == nil || *in.DryRun
		res, err := g.undoRunTool(ctx, req, in.RunID, dryRun, in.ConfirmationToken)
		return nil, res, g.toolError(err)
	})
}

// Instructions returns what the Guard adds to the server's instructions
// for the agent, as it would say it now: the steps of its approval mode
// with its tools' names, that values in diffs and reports are data, and,
// when writes are off, that they are. Servers that build their initialize
// result themselves can include it.
func (g *Guard) Instructions() string {
	return g.voice.Instructions(g.WritesEnabled(), g.unknownWriteMode())
}
