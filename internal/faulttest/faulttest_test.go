package faulttest

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/mcp-changeset/changeset-go/ledger"
)

func TestRowProblems(t *testing.T) {
	now := time.Date(2026, 11, 30, 9, 0, 0, 0, time.UTC)
	base := ledger.Change{ID: "chg_x", CreatedAt: now, ExpiresAt: now.Add(time.Minute), Undoable: true}
	for _, tc := range []struct {
		name string
		edit func(c *ledger.Change)
		want string // "" for a sound row
	}{
		{"pending", func(c *ledger.Change) { c.Status, c.ConfirmHash = ledger.Pending, "d" }, ""},
		{"pending without digest", func(c *ledger.Change) { c.Status = ledger.Pending }, "confirmation digest"},
		{"applied", func(c *ledger.Change) {
			c.Status, c.AppliedAt, c.Result, c.UndoHash = ledger.Applied, now, json.RawMessage("{}"), "u"
		}, ""},
		{"applied without result", func(c *ledger.Change) { c.Status, c.AppliedAt, c.UndoHash = ledger.Applied, now, "u" }, "result"},
		{"applied before created", func(c *ledger.Change) {
			c.Status, c.AppliedAt, c.Result, c.UndoHash = ledger.Applied, now.Add(-time.Hour), json.RawMessage("{}"), "u"
		}, "before it was created"},
		{"undone with undo digest", func(c *ledger.Change) {
			c.Status, c.AppliedAt, c.UndoneAt, c.UndoHash = ledger.Undone, now, now, "u"
		}, "undo digest"},
		{"transactional in flight", func(c *ledger.Change) { c.Status, c.Transactional = ledger.Applying, true }, "in flight"},
		{"failed without type", func(c *ledger.Change) { c.Status = ledger.ApplyFailed }, "error type"},
		{"expired with applied_at", func(c *ledger.Change) { c.Status, c.AppliedAt = ledger.Expired, now }, "never applied"},
		{"unknown status", func(c *ledger.Change) { c.Status = "limbo" }, "unknown status"},
	} {
		c := base
		tc.edit(&c)
		got := strings.Join(RowProblems(&c, now, time.Minute), "; ")
		if (tc.want == "") != (got == "") || !strings.Contains(got, tc.want) {
			t.Errorf("%s: problems %q, want %q", tc.name, got, tc.want)
		}
	}
}

func TestCorruptPageKeepsTheHeader(t *testing.T) {
	path := filepath.Join(t.TempDir(), "db")
	orig := []byte(strings.Repeat("a", 3*512))
	if err := os.WriteFile(path, orig, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := CorruptPage(path, 1, 512); err != nil {
		t.Fatal(err)
	}
	if err := CorruptPage(path, 3, 512); err != nil {
		t.Fatal(err)
	}
	got, _ := os.ReadFile(path)
	if string(got[:100]) != string(orig[:100]) || string(got[512:1024]) != string(orig[512:1024]) {
		t.Fatal("damaged more than asked")
	}
	if string(got[100:512]) == string(orig[100:512]) || string(got[1024:]) == string(orig[1024:]) {
		t.Fatal("damaged less than asked")
	}
}
