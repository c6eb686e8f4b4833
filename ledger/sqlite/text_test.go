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
// has. The index covers the rows up to its watermark only; the check
// indexes the tail first, in a transaction it then rolls back.
func ftsIntegrity(t *testing.T, b *Backend) {
	t.Helper()
	tx, err := b.DB().Begin()
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback()
	for _, s := range []string{
		`INSERT INTO changes_text (rowid, summary, action, resource) SELECT rowid, summary, action, resource
		 FROM changes WHERE rowid > (SELECT indexed FROM changes_text_tail)`,
		`INSERT INTO changes_text (changes_text, rank) VALUES ('integrity-check', 1)`,
	} {
		if _, err := tx.Exec(s); err != nil {
			t.Fatalf("the full-text index does not match the changes: %v", err)
		}
	}
}

// textTail is how many changes the full-text index does not cover yet.
func textTail(t *testing.T, b *Backend) int {
	t.Helper()
	var n int
	if err := b.DB().QueryRow(`SELECT count(*) FROM changes WHERE rowid > (SELECT indexed FROM changes_text_tail)`).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
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

// TestTextIndex_CoversTheTailByTestingIt writes more changes than the
// full-text index leaves uncovered (its tail, fewer than 128) and checks
// that the index follows its watermark in batches, that a search finds
// the matches on both sides of it, and that updates, deletes and a rowid
// reused after a delete at the top are neither lost nor found twice.
func TestTextIndex_CoversTheTailByTestingIt(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := newLedger(t)
	insert := func(i int, summary string) {
		t.Helper()
		c := pendingChange(fmt.Sprintf("chg_%03d", i), t0.Add(time.Duration(i)*time.Second))
		c.Summary = summary
		if err := b.InsertChange(ctx, b.DB(), c); err != nil {
			t.Fatal(err)
		}
	}
	for i := range 300 {
		insert(i, fmt.Sprintf("set gamma%03d", i))
		if n := textTail(t, b); n >= 128 {
			t.Fatalf("after %d inserts the index leaves %d changes to the tail", i+1, n)
		}
	}
	if n := textTail(t, b); n == 0 || n == 300 {
		t.Fatalf("the tail holds %d of 300 changes: the test needs changes on both sides", n)
	}
	ftsIntegrity(t, b)
	search := func(text string) []string {
		t.Helper()
		got, err := b.ListChanges(ctx, b.DB(), ledger.ChangeFilter{Text: text, Limit: 1000})
		if err != nil {
			t.Fatal(err)
		}
		n, err := b.CountChanges(ctx, b.DB(), ledger.ChangeFilter{Text: text})
		if err != nil || n != len(got) {
			t.Fatalf("CountChanges(%q) = %d, %v; the list holds %d", text, n, err, len(got))
		}
		var ids []string
		for _, c := range got {
			ids = append(ids, c.ID)
		}
		return ids
	}
	if got := search("GAMMA"); len(got) != 300 {
		t.Fatalf("GAMMA found %d changes, want 300", len(got))
	}
	// One change on each side of the watermark (the first is indexed, the
	// last in the tail): renamed, then the last one deleted and its rowid
	// reused by a new change.
	for _, id := range []string{"chg_000", "chg_299"} {
		c, err := b.GetChange(ctx, b.DB(), id)
		if err != nil {
			t.Fatal(err)
		}
		c.Summary, c.Status = "renamed delta", ledger.Expired
		if err := b.UpdateChange(ctx, b.DB(), c, ledger.Pending); err != nil {
			t.Fatal(err)
		}
	}
	ftsIntegrity(t, b)
	if got := search("delta"); fmt.Sprint(got) != "[chg_299 chg_000]" {
		t.Fatalf("delta found %v, want [chg_299 chg_000]", got)
	}
	if got := search("gamma000"); len(got) != 0 {
		t.Fatalf("gamma000 found %v after its rename", got)
	}
	var top int64
	if err := b.DB().QueryRow(`SELECT indexed FROM changes_text_tail`).Scan(&top); err != nil {
		t.Fatal(err)
	}
	// Delete every change down to and including the newest indexed one:
	// the next insert takes its rowid, below or at the watermark.
	if _, err := b.DB().Exec(`DELETE FROM changes WHERE rowid >= ?`, top); err != nil {
		t.Fatal(err)
	}
	ftsIntegrity(t, b)
	insert(999, "reused epsilon")
	var rowid int64
	if err := b.DB().QueryRow(`SELECT rowid FROM changes WHERE id = 'chg_999'`).Scan(&rowid); err != nil || rowid > top {
		t.Fatalf("the new change's rowid is %d (%v), want one at or below the watermark %d", rowid, err, top)
	}
	ftsIntegrity(t, b)
	if got := search("epsilon"); fmt.Sprint(got) != "[chg_999]" {
		t.Fatalf("epsilon found %v, want [chg_999]", got)
	}
	if got := search("delta"); fmt.Sprint(got) != "[chg_000]" {
		t.Fatalf("delta found %v after the delete, want [chg_000]", got)
	}
}
