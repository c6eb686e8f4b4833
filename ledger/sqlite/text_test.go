package sqlite

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/mcp-changeset/changeset-go/ledger"
)

// ftsIntegrity runs FTS5's own check of changes_text against the rows of
// changes: it fails if the index lacks a row's text or holds text no row
// has.
func ftsIntegrity(t *testing.T, b *Backend) {
	t.Helper()
	if _, err := b.DB().Exec(`INSERT INTO changes_text (changes_text, rank) VALUES ('integrity-check', 1)`); err != nil {
		t.Fatalf("the full-text index does not match the changes: %v", err)
	}
}

// TestTextIndex_FollowsInsertsUpdatesDeletesAndVacuum writes changes,
// rewrites the summaries of some, deletes others and rewrites the file
// with VACUUM (which may renumber the rowids the index is keyed by), and
// checks after each step that the full-text index matches the table and
// that searches find exactly the changes whose text holds the words.
func TestTextIndex_FollowsInsertsUpdatesDeletesAndVacuum(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := newLedger(t)
	for i := range 30 {
		c := pendingChange(fmt.Sprintf("chg_%02d", i), t0.Add(time.Duration(i)*time.Second))
		c.Summary = fmt.Sprintf("set alpha%02d", i)
		c.Resource = "res/" + []string{"red", "green", "blue"}[i%3]
		if err := b.InsertChange(ctx, b.DB(), c); err != nil {
			t.Fatal(err)
		}
	}
	search := func(text string) int {
		t.Helper()
		got, err := b.ListChanges(ctx, b.DB(), ledger.ChangeFilter{Text: text, Limit: 100})
		if err != nil {
			t.Fatal(err)
		}
		n, err := b.CountChanges(ctx, b.DB(), ledger.ChangeFilter{Text: text})
		if err != nil || n != len(got) {
			t.Fatalf("CountChanges(%q) = %d, %v; the list holds %d", text, n, err, len(got))
		}
		return len(got)
	}
	ftsIntegrity(t, b)
	if n := search("GREEN"); n != 10 {
		t.Fatalf("GREEN found %d changes, want 10", n)
	}
	// A transition rewrites every column; a new summary replaces the old
	// one's trigrams.
	for i := range 5 {
		c, err := b.GetChange(ctx, b.DB(), fmt.Sprintf("chg_%02d", i))
		if err != nil {
			t.Fatal(err)
		}
		c.Summary, c.Status = "renamed beta", ledger.Expired
		if err := b.UpdateChange(ctx, b.DB(), c, ledger.Pending); err != nil {
			t.Fatal(err)
		}
	}
	ftsIntegrity(t, b)
	if n, m := search("beta"), search("alpha0"); n != 5 || m != 5 {
		t.Fatalf("after renaming: beta %d, alpha0 %d; want 5 and 5", n, m)
	}
	if _, err := b.DB().Exec(`DELETE FROM changes WHERE id < 'chg_10'`); err != nil {
		t.Fatal(err)
	}
	ftsIntegrity(t, b)
	if n, m := search("beta"), search("alpha"); n != 0 || m != 20 {
		t.Fatalf("after deleting: beta %d, alpha %d; want 0 and 20", n, m)
	}
	if err := b.Vacuum(ctx); err != nil {
		t.Fatal(err)
	}
	ftsIntegrity(t, b)
	if n, m := search("alpha1"), search("blue"); n != 10 || m != 7 {
		t.Fatalf("after VACUUM: alpha1 %d, blue %d; want 10 and 7", n, m)
	}
}
