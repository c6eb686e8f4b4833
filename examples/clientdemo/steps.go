package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"time"
)

// setup builds the programs, makes the notes directory and starts the notes
// server with writes off, as every server starts until an operator says
// otherwise.
func (d *demo) setup(ctx context.Context) error {
	d.root = filepath.Join(d.dir, "notes")
	d.ledger = filepath.Join(d.dir, "ledger.db")
	if err := os.Mkdir(d.root, 0o700); err != nil {
		return err
	}
	began := time.Now()
	bins, err := build(ctx, d.dir)
	if err != nil {
		return err
	}
	d.bins = bins
	d.note("built the notes server and mcp-changeset in %.1fs; notes in %s, ledger %s",
		time.Since(began).Seconds(), d.root, d.ledger)
	if err := d.start(ctx, false, false); err != nil {
		return err
	}
	tools, err := d.cs.ListTools(ctx, nil)
	if err != nil {
		return fmt.Errorf("list the notes server's tools: %w", err)
	}
	var names []string
	for _, t := range tools.Tools {
		names = append(names, t.Name)
	}
	d.note("started the notes server over stdio without %s: writes are off, as by default (%d tools)", writeModeEnv, len(names))
	d.detail("tools: %s", strings.Join(names, ", "))
	return nil
}

// writesOff previews a note and applies it while writes are off: the apply
// is refused, nothing is written and the token stays valid.
func (d *demo) writesOff(ctx context.Context) error {
	prev, err := d.preview(ctx, "todo.txt", "buy milk\n")
	if err != nil {
		return err
	}
	if prev["writes_enabled"] != false {
		return fmt.Errorf("the preview says writes_enabled %v on a server started without %s", prev["writes_enabled"], writeModeEnv)
	}
	d.todoID, d.todoToken = fmt.Sprint(prev["change_id"]), fmt.Sprint(prev["confirmation_token"])
	msg, err := d.refused(ctx, "apply_change", d.applyArgs(), "the token was not spent")
	if err != nil {
		return err
	}
	if _, err := os.Lstat(filepath.Join(d.root, "todo.txt")); !errors.Is(err, os.ErrNotExist) {
		return errors.New("todo.txt exists although the apply was refused")
	}
	d.ok("apply_change %s (writes off) → refused: %s; todo.txt not written", id(d.todoID), d.abbrev(msg))
	st, err := d.call(ctx, "get_change_status", map[string]any{"change_id": d.todoID})
	if err != nil {
		return err
	}
	if st["status"] != "pending" {
		return fmt.Errorf("after the refused apply the change is %v, want pending", st["status"])
	}
	d.ok("get_change_status %s → still pending: the token is not spent", id(d.todoID))
	return nil
}

// single turns writes on and applies the change writesOff previewed with
// the same token, replays the token and undoes the change.
func (d *demo) single(ctx context.Context) error {
	d.stop()
	if err := d.start(ctx, true, true); err != nil {
		return err
	}
	d.note("restarted the notes server with %s=guarded (writes on), same ledger and notes, and --dashboard 127.0.0.1:0", writeModeEnv)

	applied, err := d.call(ctx, "apply_change", d.applyArgs())
	if err != nil {
		return err
	}
	if applied["status"] != "applied" {
		return fmt.Errorf("apply_change returned status %v, want applied", applied["status"])
	}
	if err := d.expectFile("todo.txt", "buy milk\n"); err != nil {
		return err
	}
	d.ok("apply_change %s with the same token %s → applied; todo.txt holds %s; undo token %s",
		id(d.todoID), tok(d.todoToken), quote("buy milk\n"), tok(applied["undo_token"]))

	msg, err := d.refused(ctx, "apply_change", d.applyArgs(), "cannot be applied (status: applied)")
	if err != nil {
		return err
	}
	d.ok("apply_change %s with %s again (a replay) → refused: %s", id(d.todoID), tok(d.todoToken), d.abbrev(msg))

	undone, err := d.call(ctx, "undo_change", map[string]any{"change_id": d.todoID, "undo_token": applied["undo_token"]})
	if err != nil {
		return err
	}
	if undone["status"] != "undone" {
		return fmt.Errorf("undo_change returned status %v, want undone", undone["status"])
	}
	if _, err := os.Lstat(filepath.Join(d.root, "todo.txt")); !errors.Is(err, os.ErrNotExist) {
		return errors.New("the undo did not remove todo.txt")
	}
	d.ok("undo_change %s with %s → undone; todo.txt is gone again", id(d.todoID), tok(applied["undo_token"]))
	return nil
}

// personEdit previews a note, writes the file as a person would before the
// apply, and shows the apply refused with nothing written.
func (d *demo) personEdit(ctx context.Context) error {
	prev, err := d.preview(ctx, "groceries.txt", "eggs\n")
	if err != nil {
		return err
	}
	const theirs = "bread\n"
	if !d.skipPersonEdit {
		if err := os.WriteFile(filepath.Join(d.root, "groceries.txt"), []byte(theirs), 0o600); err != nil {
			return err
		}
		d.note("a person writes groceries.txt before the apply (the demo does it on disk): %s", quote(theirs))
	}
	args := map[string]any{"change_id": prev["change_id"], "confirmation_token": prev["confirmation_token"]}
	msg, err := d.refused(ctx, "apply_change", args, "the resource changed after the preview; nothing was written")
	if err != nil {
		return err
	}
	if err := d.expectFile("groceries.txt", theirs); err != nil {
		return fmt.Errorf("the refused apply touched the person's note: %w", err)
	}
	d.ok("apply_change %s → refused: %s; groceries.txt still holds the person's %s",
		id(prev["change_id"]), d.abbrev(msg), quote(theirs))
	return nil
}

// runUndo walks a run with a person's edit in between.
func (d *demo) runUndo(ctx context.Context) error {
	const label = "Write meeting notes"
	run, err := d.call(ctx, "start_run", map[string]any{"label": label})
	if err != nil {
		return err
	}
	runID := run["run_id"]
	d.ok("start_run %q → %s", label, id(runID))
	for _, n := range []struct{ name, content string }{
		{"agenda.txt", "1. budget\n2. hiring\n"},
		{"minutes.txt", "draft\n"},
		{"actions.txt", "- send the budget\n"},
	} {
		args := map[string]any{"name": n.name, "content": n.content, "run_id": runID}
		prev, err := d.call(ctx, "preview_write_note", args)
		if err != nil {
			return err
		}
		res, err := d.call(ctx, "apply_change", map[string]any{"change_id": prev["change_id"], "confirmation_token": prev["confirmation_token"]})
		if err != nil {
			return err
		}
		if res["status"] != "applied" || prev["run_id"] != runID {
			return fmt.Errorf("%s in run %v: status %v in run %v, want applied in the run", n.name, runID, res["status"], prev["run_id"])
		}
		if err := d.expectFile(n.name, n.content); err != nil {
			return err
		}
		d.ok("in %s: preview_write_note %s → %s, apply_change with %s → applied", id(runID), n.name, id(prev["change_id"]), tok(prev["confirmation_token"]))
	}

	const edited = "final minutes, written by a person\n"
	if err := os.WriteFile(filepath.Join(d.root, "minutes.txt"), []byte(edited), 0o600); err != nil {
		return err
	}
	d.note("a person edits minutes.txt directly, outside the run (the demo does it on disk): %s", quote(edited))

	dry, err := d.call(ctx, "undo_run", map[string]any{"run_id": runID})
	if err != nil {
		return err
	}
	will, skipped := list(dry["will_undo"]), list(dry["skipped"])
	if len(will) != 2 || len(skipped) != 1 || names(skipped) != "minutes.txt" || !strings.Contains(fmt.Sprint(skipped[0]), "changed after") {
		return fmt.Errorf("the dry run should undo agenda.txt and actions.txt and skip minutes.txt, the person's edit; it would undo [%s] and skip [%s]", names(will), names(skipped))
	}
	if err := d.expectFile("agenda.txt", "1. budget\n2. hiring\n"); err != nil {
		return fmt.Errorf("the dry run changed a note: %w", err)
	}
	d.ok("undo_run %s dry run → would undo %s; skip %s (%s changed after the apply, outside the run); nothing changed yet; token %s",
		id(runID), names(will), names(skipped), driftFields(skipped[0]), tok(dry["confirmation_token"]))

	rep, err := d.call(ctx, "undo_run", map[string]any{"run_id": runID, "dry_run": false, "confirmation_token": dry["confirmation_token"]})
	if err != nil {
		return err
	}
	if rep["status"] != "partially_undone" {
		return fmt.Errorf("run status %v after the undo, want partially_undone", rep["status"])
	}
	for _, gone := range []string{"agenda.txt", "actions.txt"} {
		if _, err := os.Lstat(filepath.Join(d.root, gone)); !errors.Is(err, os.ErrNotExist) {
			return fmt.Errorf("%s should be gone after the run's undo", gone)
		}
	}
	if err := d.expectFile("minutes.txt", edited); err != nil {
		return fmt.Errorf("the person's edit was not kept: %w", err)
	}
	d.ok("undo_run %s with %s → %v: %s removed; %s skipped, it keeps the person's edit",
		id(runID), tok(dry["confirmation_token"]), rep["status"], names(rep["undone"]), names(rep["skipped"]))
	return nil
}

// preview previews writing a note, checks that nothing was written and
// narrates it.
func (d *demo) preview(ctx context.Context, name, content string) (map[string]any, error) {
	_, statErr := os.Lstat(filepath.Join(d.root, name))
	prev, err := d.call(ctx, "preview_write_note", map[string]any{"name": name, "content": content})
	if err != nil {
		return nil, err
	}
	if _, err := os.Lstat(filepath.Join(d.root, name)); errors.Is(statErr, os.ErrNotExist) && !errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("the preview of %s wrote the note", name)
	}
	if !strings.HasPrefix(fmt.Sprint(prev["change_id"]), "chg_") || !strings.HasPrefix(fmt.Sprint(prev["confirmation_token"]), "confirm_") {
		return nil, fmt.Errorf("the preview of %s returned no change id or confirmation token", name)
	}
	d.ok("preview_write_note %s → %s (diff: %s), token %s; nothing written", name, id(prev["change_id"]), diffLine(prev["diff"]), tok(prev["confirmation_token"]))
	return prev, nil
}

// applyArgs are the arguments that apply the todo change.
func (d *demo) applyArgs() map[string]any {
	return map[string]any{"change_id": d.todoID, "confirmation_token": d.todoToken}
}

// ids matches the change and run ids in a server's message.
var ids = regexp.MustCompile(`\b(chg|run)_[0-9a-f]{8,}`)

// abbrev shortens the change and run ids in a server's message.
func (d *demo) abbrev(msg string) string {
	return ids.ReplaceAllStringFunc(msg, func(s string) string { return id(s) })
}

// driftFields names the fields that drifted in a skipped entry ("sha256").
func driftFields(v any) string {
	m, _ := v.(map[string]any)
	var fields []string
	for _, e := range list(m["drift"]) {
		f, _ := e.(map[string]any)
		fields = append(fields, fmt.Sprint(f["field"]))
	}
	if len(fields) == 0 {
		return "it"
	}
	return "its " + strings.Join(fields, ", ")
}

func (d *demo) expectFile(name, want string) error {
	got, err := os.ReadFile(filepath.Join(d.root, name))
	if err != nil {
		return err
	}
	if string(got) != want {
		return fmt.Errorf("%s holds %q, want %q", name, got, want)
	}
	return nil
}
