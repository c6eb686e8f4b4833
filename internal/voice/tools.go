package voice

// The descriptions of the Guard's tools, and of the run_id property it
// adds to every preview tool's input. Each says what the tool does and
// what to do with its answer, in as few words as that takes: the agent
// reads them in every conversation.

// PreviewTool is what a preview tool's description adds to the
// operation's own description.
func (v *Voice) PreviewTool() string {
	if v.mode == User {
		return "Preview only: changes nothing. Show the diff to the user, then call " + v.Tool("apply_change") + "; their client asks them to approve."
	}
	return "Preview only: changes nothing. Show the diff to the user; call " + v.Tool("apply_change") + " only after they approve."
}

// RunIDParam describes the optional run_id of a preview tool's input.
func (v *Voice) RunIDParam() string {
	return "optional, from " + v.Tool("start_run")
}

// ApplyTool describes apply_change.
func (v *Voice) ApplyTool() string {
	if v.mode == User {
		return "Apply a previewed change, once, exactly as previewed. The user's client asks them to approve it first, showing the diff. Refused if the state changed, the preview expired, or writes are off."
	}
	return "Apply a previewed change, once, exactly as previewed, only after the user saw its diff and approved. Refused if the state changed, the token is used up, or writes are off."
}

// UndoTool describes undo_change.
func (v *Voice) UndoTool() string {
	if v.mode == User {
		return "Undo an applied change when the user asks; their client asks them to approve. Refused if the resource changed since (later edits are kept) or the undo window closed."
	}
	return "Undo an applied change with its undo_token when the user asks. Refused if it changed since (later edits are kept) or the undo window closed."
}

// StatusTool describes get_change_status.
func (v *Voice) StatusTool() string {
	return "Show a change: its status, diff and times. Tokens are never shown."
}

// StartRunTool describes start_run.
func (v *Voice) StartRunTool() string {
	return "Start a run: one unit for a task's changes, to review and undo together. Pass its run_id to each preview of the task."
}

// GetRunTool describes get_run.
func (v *Voice) GetRunTool() string {
	return "Show a run: its changes, newest first, and its undo report. If next_cursor is set, call again with it as cursor."
}

// ListRunsTool describes list_runs.
func (v *Voice) ListRunsTool() string { return "List runs, newest first." }

// UndoRunTool describes undo_run.
func (v *Voice) UndoRunTool() string {
	if v.mode == User {
		return "Undo a run's changes, newest first. By default a dry run: changes nothing, reports what would be undone, kept (changed since) or not exact. Show it to the user, then call again with dry_run=false; their client asks them to approve."
	}
	if v.mode == Person { // its result's approval costs bytes: the dry run's next_step says the rest
		return "Undo a run's changes, newest first. By default a dry run: changes nothing, says what would be undone, kept (changed since) or inexact; then follow its next_step."
	}
	return "Undo a run's changes, newest first. By default a dry run: changes nothing, reports what would be undone, kept (changed since) or not exact. Only after the user approves it, call again with dry_run=false and its confirmation_token."
}

// ApproveField describes the one field of the approval form the user's
// client shows.
func ApproveField() string {
	return "Yes goes ahead exactly as shown; no leaves everything as it is."
}
