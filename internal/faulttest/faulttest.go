// Package faulttest holds what the fault harness (the root package's
// fault_test.go) needs beyond the Guard: the invariants every ledger row
// keeps whatever fails, and ways to break a ledger's environment (damage a
// page of its file, mount a filesystem too small for it).
package faulttest

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"time"

	"github.com/mcp-changeset/changeset-go/ledger"
)

// RowProblems checks one change against the invariants that hold after any
// fault: a crash at any point, a busy or read-only or full or damaged
// ledger, a clock that jumps. now is the ledger's clock and skew the
// largest backward clock jump a claim accepts (Options.MaxClockSkew). It
// returns one line per broken invariant, none when the row is sound.
//
// The invariants go beyond those of ledger.Ledger.Check: they are what a
// reader of the state diagram in docs/design.md may rely on.
//
//   - the status is one of the eight;
//   - only a pending change holds a confirmation digest, and every one does;
//   - only an applied change of an undoable operation holds an undo
//     digest, and it holds one while its undo window is open;
//   - a change that reached applied (applied, undoing, undone,
//     undo_failed) records when, and never before it was created (less
//     the skew); a pending or expired one was never applied;
//   - an applied change has its result stored; an undone one records when
//     it was undone;
//   - a failed change names its error's type;
//   - a transactional change is never in flight (applying, undoing);
//   - its confirmation token expires after the change was created.
func RowProblems(c *ledger.Change, now time.Time, skew time.Duration) []string {
	var out []string
	bad := func(format string, args ...any) {
		out = append(out, fmt.Sprintf("change %s (%s): ", c.ID, c.Status)+fmt.Sprintf(format, args...))
	}
	if !c.Status.Valid() {
		bad("unknown status")
		return out
	}
	if (c.Status == ledger.Pending) != (c.ConfirmHash != "") {
		bad("confirmation digest present: %t", c.ConfirmHash != "")
	}
	undoOpen := c.UndoExpiresAt.IsZero() || now.Before(c.UndoExpiresAt)
	switch {
	case c.UndoHash != "" && (c.Status != ledger.Applied || !c.Undoable):
		bad("holds an undo digest")
	case c.Status == ledger.Applied && c.Undoable && undoOpen && c.UndoHash == "":
		bad("undoable and within its undo window, but no undo digest")
	}
	switch c.Status {
	case ledger.Applied, ledger.Undoing, ledger.Undone, ledger.UndoFailed:
		if c.AppliedAt.IsZero() {
			bad("no applied_at")
		} else if c.AppliedAt.Before(c.CreatedAt.Add(-skew)) {
			bad("applied at %v, before it was created at %v", c.AppliedAt, c.CreatedAt)
		}
	case ledger.Pending, ledger.Expired:
		if !c.AppliedAt.IsZero() || c.Result != nil {
			bad("never applied, yet holds applied_at or a result")
		}
	}
	if c.Status == ledger.Applied && c.Result == nil {
		bad("applied without a stored result")
	}
	if c.Status == ledger.Undone && c.UndoneAt.IsZero() {
		bad("undone without undone_at")
	}
	if (c.Status == ledger.ApplyFailed || c.Status == ledger.UndoFailed) && c.ErrorType == "" {
		bad("failed without an error type")
	}
	if c.Transactional && c.Status.InFlight() {
		bad("a transactional change in flight")
	}
	if !c.ExpiresAt.After(c.CreatedAt) {
		bad("expires at %v, not after its creation at %v", c.ExpiresAt, c.CreatedAt)
	}
	return out
}

// CorruptPage overwrites page number page (counted from 1) of the SQLite
// file at path with a pattern that is no valid b-tree page.
func CorruptPage(path string, page, pageSize int64) error {
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		return err
	}
	junk := []byte(strings.Repeat("\xde\xad\xbe\xef", int(pageSize/4)))
	off := (page - 1) * pageSize
	if page == 1 {
		// Keep the 100-byte header, so the file still says it is SQLite
		// and a ledger: the damage is in the schema page's cells.
		junk, off = junk[:pageSize-100], 100
	}
	if _, err := f.WriteAt(junk, off); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// Digest returns the SHA-256 of the file at path, to show a refused
// operation left it unchanged.
func Digest(path string) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", err
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return "", err
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

// MountTmpfs mounts a tmpfs of the given size ("1M") on dir and returns a
// function that unmounts it. Only root can, and only where mount(8) exists
// and the kernel lets this process mount; otherwise it returns an error
// saying why.
func MountTmpfs(dir, size string) (unmount func(), err error) {
	if os.Geteuid() != 0 {
		return nil, fmt.Errorf("mounting a small tmpfs needs root")
	}
	out, err := exec.Command("mount", "-t", "tmpfs", "-o", "size="+size+",mode=0700", "tmpfs", dir).CombinedOutput()
	if err != nil {
		return nil, fmt.Errorf("mount -t tmpfs failed: %v: %s", err, strings.TrimSpace(string(out)))
	}
	return func() { exec.Command("umount", "-l", dir).Run() }, nil
}
