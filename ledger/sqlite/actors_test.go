package sqlite

import (
	"context"
	"encoding/json"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/mcp-changeset/changeset-go/ledger"
)

// TestChangeActors_HoldExactlyTheActorsOfEachChange checks the triggers of
// change_actors (migrations/011_flat_lists.sql): after an insert, updates
// that set, change, share and clear actors, and a delete, the table holds
// one row per (actor, change) for the actors the change names now, and no
// row left behind. The lists recheck the columns, so a stale row would
// not change an answer, but it would grow the table and the ranges a page
// reads.
func TestChangeActors_HoldExactlyTheActorsOfEachChange(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b, err := Open(ctx, filepath.Join(t.TempDir(), "actors.db"), ledger.OpenOptions{Create: true, BusyTimeout: ledger.DefaultBusyTimeout})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	t0 := time.UnixMicro(1_000_000)
	c := &ledger.Change{ID: "chg_1", Action: "a", Status: ledger.Pending, ScopeHash: "s", Payload: json.RawMessage(`{}`),
		PreviewedBy: "agent:kim", CreatedAt: t0, UpdatedAt: t0, ExpiresAt: t0.Add(time.Hour)}
	if err := b.InsertChange(ctx, b.DB(), c); err != nil {
		t.Fatal(err)
	}
	other := *c
	other.ID, other.PreviewedBy, other.AppliedBy = "chg_2", "agent:bob", "agent:bob"
	if err := b.InsertChange(ctx, b.DB(), &other); err != nil {
		t.Fatal(err)
	}
	want := func(step string, rows ...string) {
		t.Helper()
		got, err := b.DB().Query(`SELECT actor || ' ' || id FROM change_actors ORDER BY actor, id`)
		if err != nil {
			t.Fatal(err)
		}
		defer got.Close()
		var have []string
		for got.Next() {
			var s string
			if err := got.Scan(&s); err != nil {
				t.Fatal(err)
			}
			have = append(have, s)
		}
		if !slices.Equal(have, rows) {
			t.Errorf("%s: change_actors holds\n%s\nwant\n%s", step, strings.Join(have, "\n"), strings.Join(rows, "\n"))
		}
	}
	want("inserted", "agent:bob chg_2", "agent:kim chg_1")
	steps := []struct {
		name        string
		to          ledger.Status
		applied, by string
		rows        []string
	}{
		{"applied by the previewer", ledger.Applying, "agent:kim", "", []string{"agent:bob chg_2", "agent:kim chg_1"}},
		{"applier changed", ledger.Applied, "agent:ann", "", []string{"agent:ann chg_1", "agent:bob chg_2", "agent:kim chg_1"}},
		{"applier changed again", ledger.ApplyFailed, "agent:joe", "", []string{"agent:bob chg_2", "agent:joe chg_1", "agent:kim chg_1"}},
		{"applier changed back", ledger.Applied, "agent:ann", "", []string{"agent:ann chg_1", "agent:bob chg_2", "agent:kim chg_1"}},
		{"undone by the applier", ledger.Undoing, "agent:ann", "agent:ann", []string{"agent:ann chg_1", "agent:bob chg_2", "agent:kim chg_1"}},
		{"applier cleared, still the undoer", ledger.Undone, "", "agent:ann", []string{"agent:ann chg_1", "agent:bob chg_2", "agent:kim chg_1"}},
		{"undoer cleared", ledger.UndoFailed, "", "", []string{"agent:bob chg_2", "agent:kim chg_1"}},
		{"undoer set to the previewer", ledger.Undoing, "", "agent:kim", []string{"agent:bob chg_2", "agent:kim chg_1"}},
		{"undoer changed away from the previewer", ledger.Undone, "", "agent:lee", []string{"agent:bob chg_2", "agent:kim chg_1", "agent:lee chg_1"}},
	}
	for _, s := range steps {
		from := c.Status
		c.Status, c.AppliedBy, c.UndoneBy = s.to, s.applied, s.by
		c.AppliedAt = t0
		c.UpdatedAt = c.UpdatedAt.Add(time.Second)
		if err := b.UpdateChange(ctx, b.DB(), c, from); err != nil {
			t.Fatalf("%s: %v", s.name, err)
		}
		want(s.name, s.rows...)
	}
	if n, _, err := b.DeleteChanges(ctx, b.DB(), []string{"chg_1"}, []ledger.Status{ledger.Undone}); err != nil || n != 1 {
		t.Fatalf("delete: %d, %v", n, err)
	}
	want("deleted", "agent:bob chg_2")
}
