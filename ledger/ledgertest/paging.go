package ledgertest

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/mcp-changeset/changeset-go/ledger"
	"github.com/mcp-changeset/changeset-go/ledger/driver"
)

// testChangePaging pages through a run of 250 changes, many created in
// the same microsecond, with several page sizes: every change appears
// exactly once, newest first.
func testChangePaging(t *testing.T, h Harness) {
	ctx := context.Background()
	l, _ := open(t, h)
	insertRuns(t, l, "run_p", "run_other")
	rng := rand.New(rand.NewPCG(1, 2))
	var cs []*ledger.Change
	for i := range 280 {
		// 250 of run_p and 30 of another run, over 40 microseconds,
		// some with nanoseconds that the ledger drops.
		c := pendingChange(fmt.Sprintf("chg_%020x", rng.Uint64()), t0.Add(time.Duration(i%40)*time.Microsecond+time.Duration(i%3)*100))
		c.RunID = "run_p"
		if i >= 250 { // in the same microseconds as run_p's
			c.RunID = "run_other"
		}
		cs = append(cs, c)
	}
	rng.Shuffle(len(cs), func(i, j int) { cs[i], cs[j] = cs[j], cs[i] })
	err := l.WithTx(ctx, func(tx *ledger.Tx) error {
		for _, c := range cs {
			if err := tx.InsertChange(c); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	newestFirst := func(run string) []string {
		var sel []*ledger.Change
		for _, c := range cs {
			if run == "" || c.RunID == run {
				sel = append(sel, stored(c))
			}
		}
		slices.SortFunc(sel, func(a, b *ledger.Change) int {
			return cmp.Or(b.CreatedAt.Compare(a.CreatedAt), strings.Compare(b.ID, a.ID))
		})
		ids := make([]string, len(sel))
		for i, c := range sel {
			ids[i] = c.ID
		}
		return ids
	}
	for _, tc := range []struct {
		run  string
		size int
	}{{"run_p", 1}, {"run_p", 7}, {"run_p", 100}, {"run_p", 250}, {"run_p", 251}, {"", 13}} {
		want := newestFirst(tc.run)
		if tc.run == "run_p" && len(want) != 250 {
			t.Fatalf("the fixture has %d changes in run_p, want 250", len(want))
		}
		var got []string
		var key *ledger.ChangeKey
		for pages := 0; ; pages++ {
			if pages > len(want)+1 {
				t.Fatalf("run %q, pages of %d: paging does not end", tc.run, tc.size)
			}
			page, err := l.Changes(ctx, ledger.ChangeFilter{RunID: tc.run, Limit: tc.size, Before: key})
			if err != nil {
				t.Fatal(err)
			}
			if len(page) > tc.size {
				t.Fatalf("a page of %d changes for a limit of %d", len(page), tc.size)
			}
			if len(page) == 0 {
				break
			}
			for _, c := range page {
				got = append(got, c.ID)
			}
			last := page[len(page)-1]
			key = &ledger.ChangeKey{CreatedAt: last.CreatedAt, ID: last.ID}
		}
		if !slices.Equal(got, want) {
			t.Errorf("run %q in pages of %d: %d changes, want %d, in order; first difference at %d", tc.run, tc.size, len(got), len(want), firstDiff(got, want))
		}
	}
	// A key with nanoseconds lies between two stored microseconds: the
	// changes of the earlier one come after it, whatever their IDs.
	at := t0.Add(20 * time.Microsecond)
	for _, tc := range []struct {
		key  ledger.ChangeKey
		want func(c *ledger.Change) bool
	}{
		{ledger.ChangeKey{CreatedAt: at, ID: ""}, func(c *ledger.Change) bool { return c.CreatedAt.Before(at) }},
		{ledger.ChangeKey{CreatedAt: at, ID: "chg_~"}, func(c *ledger.Change) bool { return !c.CreatedAt.After(at) }},
		{ledger.ChangeKey{CreatedAt: at.Add(time.Nanosecond), ID: ""}, func(c *ledger.Change) bool { return !c.CreatedAt.After(at) }},
		{ledger.ChangeKey{CreatedAt: at.Add(-time.Nanosecond), ID: "chg_~"}, func(c *ledger.Change) bool { return c.CreatedAt.Before(at) }},
	} {
		n := 0
		for _, c := range cs {
			if tc.want(stored(c)) {
				n++
			}
		}
		got, err := l.Changes(ctx, ledger.ChangeFilter{Before: &tc.key})
		if err != nil || len(got) != n {
			t.Errorf("Before %v %q: %d changes (%v), want %d", tc.key.CreatedAt, tc.key.ID, len(got), err, n)
		}
	}
	// CountChanges ignores Limit and Before.
	key := &ledger.ChangeKey{CreatedAt: at, ID: ""}
	if n, err := driver.BackendOf(l).CountChanges(ctx, l.DB(), ledger.ChangeFilter{RunID: "run_p", Limit: 5, Before: key}); err != nil || n != 250 {
		t.Errorf("CountChanges(run_p, Limit 5, Before) = %d, %v; want 250", n, err)
	}
}

func firstDiff(a, b []string) int {
	for i := range min(len(a), len(b)) {
		if a[i] != b[i] {
			return i
		}
	}
	return min(len(a), len(b))
}

// testChangeScopeAndCount filters by scope and checks that CountChanges
// counts what Changes lists, for every filter.
func testChangeScopeAndCount(t *testing.T, h Harness) {
	ctx := context.Background()
	l, _ := open(t, h)
	insertRuns(t, l, "run_a")
	add := func(id, scope string, st ledger.Status, run string, created time.Time, deps ...string) {
		c := pendingChange(id, created)
		c.ScopeHash, c.Status, c.RunID, c.DependsOn = ledger.Digest(scope), st, run, deps
		if st == ledger.Applied {
			c.AppliedAt = created
		}
		insertChanges(t, l, c)
	}
	add("chg_1", "a", ledger.Pending, "", sec(1), "rule:1")
	add("chg_2", "a", ledger.Pending, "run_a", sec(2))
	add("chg_3", "b", ledger.Pending, "", sec(3), "rule:1")
	add("chg_4", "a", ledger.Applied, "run_a", sec(4), "rule:1", "rule:2")
	add("chg_5", "b", ledger.Expired, "", sec(5))
	for _, tc := range []struct {
		f    ledger.ChangeFilter
		want string
	}{
		{ledger.ChangeFilter{ScopeHash: "a"}, "chg_4 chg_2 chg_1"},
		{ledger.ChangeFilter{ScopeHash: "b"}, "chg_5 chg_3"},
		{ledger.ChangeFilter{ScopeHash: "a", Statuses: []ledger.Status{ledger.Pending}}, "chg_2 chg_1"},
		{ledger.ChangeFilter{ScopeHash: "a", RunID: "run_a"}, "chg_4 chg_2"},
		{ledger.ChangeFilter{ScopeHash: "c"}, ""},
		{ledger.ChangeFilter{DependsOn: "rule:1"}, "chg_4 chg_3 chg_1"},
		{ledger.ChangeFilter{DependsOn: "rule:1", ScopeHash: "a", Statuses: []ledger.Status{ledger.Applied}}, "chg_4"},
		// Any of several resources: each change once, however many it names.
		{ledger.ChangeFilter{DependsOnAny: []string{"rule:2"}}, "chg_4"},
		{ledger.ChangeFilter{DependsOnAny: []string{"rule:1", "rule:2"}}, "chg_4 chg_3 chg_1"},
		{ledger.ChangeFilter{DependsOnAny: []string{"rule:2", "rule:9"}, Statuses: []ledger.Status{ledger.Pending}}, ""},
		{ledger.ChangeFilter{DependsOnAny: []string{"rule:9"}}, ""},
		{ledger.ChangeFilter{}, "chg_5 chg_4 chg_3 chg_2 chg_1"},
		// Each expires a minute after it was created, one second apart.
		{ledger.ChangeFilter{ScopeHash: "a", Statuses: []ledger.Status{ledger.Pending}, ExpiresAfter: sec(1).Add(time.Minute)}, "chg_2"},
		{ledger.ChangeFilter{ExpiresAfter: sec(3).Add(time.Minute - time.Microsecond)}, "chg_5 chg_4 chg_3"},
	} {
		got := strings.Join(changeIDs(t, l, tc.f), " ")
		if got != tc.want {
			t.Errorf("Changes(%+v) = %q, want %q", tc.f, got, tc.want)
		}
		n, err := driver.BackendOf(l).CountChanges(ctx, l.DB(), tc.f)
		if want := len(strings.Fields(tc.want)); err != nil || n != want {
			t.Errorf("CountChanges(%+v) = %d, %v; want %d", tc.f, n, err, want)
		}
	}
	// Inside a transaction, a count sees the transaction's own rows.
	err := l.WithTx(ctx, func(tx *ledger.Tx) error {
		c := pendingChange("chg_6", sec(6))
		c.ScopeHash = "a"
		if err := tx.InsertChange(c); err != nil {
			return err
		}
		n, err := driver.BackendOf(l).CountChanges(ctx, tx.SQL(), ledger.ChangeFilter{ScopeHash: "a", Statuses: []ledger.Status{ledger.Pending}})
		if err == nil && n != 3 {
			t.Errorf("CountChanges in the inserting transaction = %d, want 3", n)
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
}

// testChangeDependsOn finds the changes that depend on a resource, each
// once, and forgets a change's dependencies with the change: when it is
// deleted, and when its insert rolls back.
func testChangeDependsOn(t *testing.T, h Harness) {
	ctx := context.Background()
	l, _ := open(t, h)
	add := func(id string, created time.Time, deps []string) *ledger.Change {
		c := pendingChange(id, created)
		c.Status, c.DependsOn = ledger.Expired, deps
		insertChanges(t, l, c)
		return c
	}
	c1 := add("chg_1", sec(1), []string{"rule:42", "funnel:7"})
	c2 := add("chg_2", sec(2), []string{"rule:42"})
	c3 := add("chg_3", sec(3), []string{})
	c4 := add("chg_4", sec(4), nil)
	c5 := add("chg_5", sec(5), []string{"rule:42", "rule:42", "Rule:42 "})
	for _, c := range []*ledger.Change{c1, c2, c3, c4, c5} {
		if got := mustGet(t, l, c.ID); !slices.Equal(got.DependsOn, c.DependsOn) || (got.DependsOn == nil) != (c.DependsOn == nil) {
			t.Errorf("%s: DependsOn read back as %#v, want %#v", c.ID, got.DependsOn, c.DependsOn)
		}
	}
	for dep, want := range map[string]string{
		"rule:42":  "chg_5 chg_2 chg_1", // chg_5 once, though it names rule:42 twice
		"funnel:7": "chg_1",
		"Rule:42 ": "chg_5", // exactly, byte for byte
		"rule:4":   "",
		"rule:42%": "",
	} {
		if got := strings.Join(changeIDs(t, l, ledger.ChangeFilter{DependsOn: dep}), " "); got != want {
			t.Errorf("DependsOn %q = %q, want %q", dep, got, want)
		}
	}
	// Deleted (as Prune deletes), a change no longer depends on anything,
	// even if a new change takes its ID.
	if n, _, err := driver.BackendOf(l).DeleteChanges(ctx, l.DB(), []string{"chg_1", "chg_5"}, []ledger.Status{ledger.Expired}); err != nil || n != 2 {
		t.Fatalf("DeleteChanges = %d, %v", n, err)
	}
	add("chg_1", sec(6), nil)
	if got := strings.Join(changeIDs(t, l, ledger.ChangeFilter{DependsOn: "rule:42"}), " "); got != "chg_2" {
		t.Errorf("after the delete, DependsOn rule:42 = %q, want chg_2", got)
	}
	if got := changeIDs(t, l, ledger.ChangeFilter{DependsOn: "funnel:7"}); len(got) != 0 {
		t.Errorf("after the delete, DependsOn funnel:7 = %v, want none", got)
	}
	// A rolled-back insert leaves no dependency behind.
	boom := errors.New("boom")
	err := l.WithTx(ctx, func(tx *ledger.Tx) error {
		c := pendingChange("chg_rolled", sec(7))
		c.DependsOn = []string{"rule:99"}
		if err := tx.InsertChange(c); err != nil {
			return err
		}
		return boom
	})
	if err != boom {
		t.Fatalf("WithTx = %v", err)
	}
	if got := changeIDs(t, l, ledger.ChangeFilter{DependsOn: "rule:99"}); len(got) != 0 {
		t.Errorf("a rolled-back change's dependency stayed: %v", got)
	}
	// A refused insert (duplicate ID) adds no dependency either.
	dup := pendingChange("chg_2", sec(8))
	dup.DependsOn = []string{"rule:dup"}
	if err := driver.BackendOf(l).InsertChange(ctx, l.DB(), dup); err == nil {
		t.Fatal("a duplicate ID was inserted")
	}
	if got := changeIDs(t, l, ledger.ChangeFilter{DependsOn: "rule:dup"}); len(got) != 0 {
		t.Errorf("a refused insert's dependency stayed: %v", got)
	}
}
