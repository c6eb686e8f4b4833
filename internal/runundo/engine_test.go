package runundo

import (
	"testing"
	"time"

	"github.com/mcp-changeset/changeset-go/ledger"
)

// The engine's behaviour is tested through the Guard, with real
// operations on both ledger backends (the root package's TestRun* tests);
// this file tests what needs no Guard.

func TestNewestFirst_ByApplyThenCommitOrderThenPreviewThenID(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	cs := []*ledger.Change{
		{ID: "chg_a", AppliedAt: t0, CreatedAt: t0},
		{ID: "chg_b", AppliedAt: t0.Add(time.Second), CreatedAt: t0},
		{ID: "chg_c", AppliedAt: t0, CreatedAt: t0.Add(time.Second)},
		{ID: "chg_d", AppliedAt: t0, CreatedAt: t0},
		{ID: "chg_e", AppliedAt: t0, CreatedAt: t0},
		{ID: "chg_f", AppliedAt: t0, CreatedAt: t0},
	}
	// chg_f's apply committed before chg_e's, both in the same instant:
	// the commit order decides, whatever the IDs say.
	NewestFirst(cs, map[string]int64{"chg_e": 12, "chg_f": 7})
	var got []string
	for _, c := range cs {
		got = append(got, c.ID)
	}
	want := []string{"chg_b", "chg_e", "chg_f", "chg_c", "chg_d", "chg_a"}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("NewestFirst = %v, want %v", got, want)
		}
	}
}
