package ledger

import (
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// TestTransitions_TableIsTheDiagram reads the state diagrams of
// docs/design.md and checks that their arrows between states are exactly
// the moves the tables allow, apart from the same-status writes of
// finished changes, which the diagrams leave out.
func TestTransitions_TableIsTheDiagram(t *testing.T) {
	doc, err := os.ReadFile("../docs/design.md")
	if err != nil {
		t.Fatal(err)
	}
	section, _, _ := strings.Cut(string(doc[strings.Index(string(doc), "\n## States"):]), "\n## Why")
	blocks := regexp.MustCompile("(?s)```mermaid\n(.*?)```").FindAllStringSubmatch(section, -1)
	if len(blocks) != 2 {
		t.Fatalf("the States section of docs/design.md has %d mermaid diagrams, want 2 (changes, runs)", len(blocks))
	}
	arrow := regexp.MustCompile(`(?m)^\s*([a-z_]+) --> ([a-z_]+)`)
	arrows := func(block string) []string {
		var out []string
		for _, m := range arrow.FindAllStringSubmatch(block, -1) {
			out = append(out, m[1]+" → "+m[2])
		}
		slices.Sort(out)
		return slices.Compact(out)
	}
	var changes []string
	for _, from := range Statuses {
		for _, to := range Statuses {
			if from.CanMoveTo(to) && !(from == to && from.Terminal()) {
				changes = append(changes, string(from)+" → "+string(to))
			}
		}
	}
	slices.Sort(changes)
	if got := arrows(blocks[0][1]); !slices.Equal(got, changes) {
		t.Errorf("the change diagram has the arrows\n%s\nthe table allows\n%s", strings.Join(got, "\n"), strings.Join(changes, "\n"))
	}
	var runs []string
	for _, from := range RunStatuses {
		for _, to := range RunStatuses {
			if from.CanMoveTo(to) {
				runs = append(runs, string(from)+" → "+string(to))
			}
		}
	}
	slices.Sort(runs)
	if got := arrows(blocks[1][1]); !slices.Equal(got, runs) {
		t.Errorf("the run diagram has the arrows\n%s\nthe table allows\n%s", strings.Join(got, "\n"), strings.Join(runs, "\n"))
	}
}

// TestTransitions_NothingLeadsBackToPending holds the promise the tokens
// rest on, whatever else the table allows.
func TestTransitions_NothingLeadsBackToPending(t *testing.T) {
	for _, from := range Statuses {
		if from.CanMoveTo(Pending) {
			t.Errorf("%s → pending is allowed: a spent confirmation token could become valid again", from)
		}
	}
	for _, s := range []RunStatus{RunUndone, RunPartiallyUndone} {
		for _, to := range RunStatuses {
			if s.CanMoveTo(to) {
				t.Errorf("run %s → %s is allowed: a finished undo could run again", s, to)
			}
		}
	}
	if Status("bogus").CanMoveTo(Pending) || Pending.CanMoveTo("bogus") || RunOpen.CanMoveTo("bogus") {
		t.Error("a status outside the lists takes part in a move")
	}
}
