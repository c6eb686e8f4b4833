package changeset_test

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
)

// orEmpty is v, or an empty list when v is absent.
func orEmpty(v any) any {
	if v == nil {
		return []any{}
	}
	return v
}

// dump is the store's settings, sorted, for comparisons.
func (s *kv) dump() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	keys := make([]string, 0, len(s.m))
	for k := range s.m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	var out string
	for _, k := range keys {
		out += k + "=" + s.m[k] + "\n"
	}
	return out
}

// dryRunPredictionRuns is how many generated runs
// TestRunPlan_DryRunPredictsTheUndo checks on each backend: 60 without
// -short (CI runs the tests so, and must keep the whole test), 10 with it.
// Each run needs a ledger of its own, which makes the whole test the
// package's slowest (on two cores about 3 s on SQLite and 8 s on
// PostgreSQL, 20 to 45 s under -race); a short run still draws a fresh
// seed each time, so repeated short runs keep exploring new cases.
func dryRunPredictionRuns() int {
	if testing.Short() {
		return 10
	}
	return 60
}

// TestRunPlan_DryRunPredictsTheUndo generates runs of creates, renames,
// deletes and settings changes, with and without Resource, with a person's
// edits interleaved, and checks that the real undo carries out exactly what
// the dry run planned: the same changes undone, skipped, closed and
// reported irreversible, nothing "not carried out". With -short it checks
// fewer runs (dryRunPredictionRuns).
func TestRunPlan_DryRunPredictsTheUndo(t *testing.T) {
	t.Parallel()
	onEachBackend(t, func(t *testing.T, kit backendKit) {
		seed := rand.Uint64()
		runs := dryRunPredictionRuns()
		t.Logf("seed %d, %d runs", seed, runs)
		rng := rand.New(rand.NewPCG(seed, 1))
		keys := []string{"theme", "language", "motd"}
		for iter := range runs {
			f := newPlanFixtureOn(t, kit)
			for _, k := range keys {
				f.store.set(k, k+"-initial")
			}
			initial := f.store.dump()
			run := f.startRun(fmt.Sprintf("random %d", iter))
			n := 0
			value := func(k string) string { n++; return fmt.Sprintf("%s-%d", k, n) }
			var log []string
			docsAlive := []int{1, 2}
			for range 3 + rng.IntN(8) {
				k := keys[rng.IntN(len(keys))]
				switch r := rng.IntN(10); {
				case r < 3:
					f.do(run, "set", map[string]any{"key": k, "value": value(k)})
					log = append(log, "set "+k)
				case r < 6:
					f.do(run, "set_plain", map[string]any{"key": k, "value": value(k)})
					log = append(log, "set_plain "+k)
				case r < 7:
					f.do(run, "create_doc", map[string]any{"title": value("doc")})
					f.docs.mu.Lock()
					docsAlive = append(docsAlive, f.docs.next)
					f.docs.mu.Unlock()
					log = append(log, "create_doc")
				case r < 8 && len(docsAlive) > 0:
					id := docsAlive[rng.IntN(len(docsAlive))]
					f.do(run, "rename_doc", map[string]any{"id": id, "title": value("doc")})
					log = append(log, fmt.Sprintf("rename_doc %d", id))
				case r < 9 && len(docsAlive) > 0:
					i := rng.IntN(len(docsAlive))
					f.do(run, "delete_doc", map[string]any{"id": docsAlive[i]})
					log = append(log, fmt.Sprintf("delete_doc %d", docsAlive[i]))
					docsAlive = slices.Delete(docsAlive, i, i+1)
				default: // a person's edit
					f.store.set(k, value(k)+"-person")
					log = append(log, "person "+k)
				}
			}
			if rng.IntN(3) == 0 {
				k := keys[rng.IntN(len(keys))]
				f.store.set(k, value(k)+"-person")
				log = append(log, "person "+k)
			}
			dry := f.dryRun(run)
			rep := f.undoRun(run, dry["confirmation_token"])
			for _, pair := range [][2]string{{"will_undo", "undone"}, {"skipped", "skipped"}, {"no_net_change", "no_net_change"}, {"irreversible", "irreversible"}} {
				if got, want := ids(orEmpty(rep[pair[1]])), ids(orEmpty(dry[pair[0]])); !slices.Equal(got, want) {
					t.Fatalf("iteration %d (%v): %s = %v, dry run's %s = %v\ndry run: %v\nundo: %v", iter, log, pair[1], got, pair[0], want, dry, rep)
				}
			}
			if rep["not_carried_out"] != nil || rep["failed"] != nil {
				t.Fatalf("iteration %d (%v): not carried out %v, failed %v", iter, log, rep["not_carried_out"], rep["failed"])
			}
			if len(orEmpty(dry["skipped"]).([]any)) == 0 && !slices.ContainsFunc(log, func(s string) bool { return len(s) > 6 && s[:6] == "person" }) &&
				f.store.dump() != initial {
				t.Fatalf("iteration %d (%v): nothing was skipped, yet the settings are\n%s\nwant\n%s", iter, log, f.store.dump(), initial)
			}
		}
	})
}
