package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/url"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/mcp-changeset/changeset-go/internal/pgtest"
	"github.com/mcp-changeset/changeset-go/ledger"
)

// The tests of verify and checkpoint run on a ledger written through the
// ledger's API, and change it behind the ledger's back through its
// database, as someone with write access to the database would.

// onBackends runs fn on a new, empty ledger on each backend: a SQLite
// file, and a PostgreSQL database.
func onBackends(t *testing.T, fn func(t *testing.T, target string)) {
	t.Run("sqlite", func(t *testing.T) {
		t.Parallel()
		target := filepath.Join(t.TempDir(), "ledger.db")
		create(t, target)
		fn(t, target)
	})
	t.Run("postgres", func(t *testing.T) {
		t.Parallel()
		target := pgtest.DSN(t)
		if u, err := url.Parse(target); err == nil {
			if pw, ok := u.User.Password(); ok {
				addSecret("the PostgreSQL password", pw)
			}
		}
		create(t, target)
		fn(t, target)
	})
}

// create creates an empty ledger at target.
func create(t *testing.T, target string) {
	t.Helper()
	l, err := ledger.Open(context.Background(), target, ledger.OpenOptions{Create: true})
	if err != nil {
		t.Fatal(err)
	}
	l.Close()
}

// writable opens the ledger at target for the test to change, closed
// with the test.
func writable(t *testing.T, target string) *ledger.Ledger {
	t.Helper()
	l, err := ledger.Open(context.Background(), target, ledger.OpenOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	return l
}

// lives writes n changes, each previewed and then expired: two history
// entries per change, chg_1's are entries 1 and 2, and so on.
func lives(t *testing.T, target string, from, n int) {
	t.Helper()
	ctx := context.Background()
	l := writable(t, target)
	for i := from; i < from+n; i++ {
		id := fmt.Sprintf("chg_%d", i)
		now := time.Now()
		c := &ledger.Change{ID: id, Action: "set", Status: ledger.Pending, ScopeHash: "s", Payload: json.RawMessage(`{}`),
			ConfirmHash: ledger.Digest(digest(id)), CreatedAt: now, UpdatedAt: now, ExpiresAt: now.Add(time.Minute)}
		if err := l.WithTx(ctx, func(tx *ledger.Tx) error { return tx.InsertChange(c) }); err != nil {
			t.Fatal(err)
		}
		addSecret("a confirmation digest", string(c.ConfirmHash))
		err := l.WithTx(ctx, func(tx *ledger.Tx) error {
			c, err := tx.Change(id)
			if err != nil {
				return err
			}
			c.Status, c.ConfirmHash, c.UpdatedAt = ledger.Expired, "", time.Now()
			return tx.UpdateChange(c, ledger.Pending)
		})
		if err != nil {
			t.Fatal(err)
		}
	}
}

// tamperWith runs a statement on the ledger's database; "?" marks a
// parameter on both backends.
func tamperWith(t *testing.T, target, query string, args ...any) {
	t.Helper()
	l := writable(t, target)
	if strings.HasPrefix(l.Location(), "postgres") {
		for i := 1; strings.Contains(query, "?"); i++ {
			query = strings.Replace(query, "?", fmt.Sprintf("$%d", i), 1)
		}
	}
	if _, err := l.DB().ExecContext(context.Background(), query, args...); err != nil {
		t.Fatalf("%s: %v", query, err)
	}
	l.Close()
}

// rehash hashes every entry of the history again, as someone who
// rewrote it and wants the chain to hold would.
func rehash(t *testing.T, target string) {
	t.Helper()
	l := writable(t, target)
	all, err := l.History(context.Background(), ledger.HistoryFilter{})
	if err != nil {
		t.Fatal(err)
	}
	var prev ledger.Hash
	for _, e := range all {
		e.Hash = ledger.HistoryHash(prev, e)
		tamperWith(t, target, `UPDATE ledger_history SET hash = ? WHERE seq = ?`, e.Hash[:], e.Seq)
		prev = e.Hash
	}
}

// moveHead sets the head row of a PostgreSQL ledger that keeps one
// (ledger_chain_head) to the history's newest entry, as someone covering
// a rewrite or a cut would; a ledger without one needs nothing.
func moveHead(t *testing.T, target string) {
	t.Helper()
	l := writable(t, target)
	if !strings.HasPrefix(l.Location(), "postgres") {
		return
	}
	var table *string
	if err := l.DB().QueryRowContext(context.Background(), `SELECT to_regclass('ledger_chain_head')::text`).Scan(&table); err != nil {
		t.Fatal(err)
	}
	if table == nil {
		return
	}
	all, err := l.History(context.Background(), ledger.HistoryFilter{})
	if err != nil {
		t.Fatal(err)
	}
	last := all[len(all)-1]
	tamperWith(t, target, `UPDATE ledger_chain_head SET seq = ?, hash = ?`, last.Seq, last.Hash[:])
}

// verifyJSON runs verify --json with args and decodes its report.
func verifyJSON(t *testing.T, target string, args ...string) (result, verifyReport) {
	t.Helper()
	r := run(t, nil, append([]string{"verify", "--json", "--ledger", target}, args...)...)
	var rep verifyReport
	if err := json.Unmarshal([]byte(r.stdout), &rep); err != nil {
		t.Fatalf("verify --json printed no report: %v\n%s", err, r)
	}
	return r, rep
}

func TestVerify_IntactLedgerExitsZero(t *testing.T) {
	t.Parallel()
	onBackends(t, func(t *testing.T, target string) {
		want(t, runL(t, target, "verify"), exitOK, "ok: 0 entries", "head: none")
		lives(t, target, 1, 3)
		r := runL(t, target, "verify")
		want(t, r, exitOK, "ok: 6 entries and 0 links of pruned entries chain", "head: entry 6 ")
		if r.stderr != "" {
			t.Errorf("an intact ledger wrote to stderr: %s", r.stderr)
		}
		r, rep := verifyJSON(t, target)
		if r.code != exitOK || !rep.OK || rep.Entries != 6 || rep.Head.Seq != 6 || rep.FirstBad != 0 || len(rep.Problems) != 0 {
			t.Fatalf("verify --json = %+v\n%s", rep, r)
		}
	})
}

func TestVerify_TamperedHistoryNamesTheFirstBadEntry(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name  string
		query []string
		first int64
	}{
		{"an edited entry", []string{`UPDATE ledger_history SET actor = 'agent:mallory' WHERE seq = 3`}, 3},
		{"a re-timed entry", []string{`UPDATE ledger_history SET at = at - 3600000000 WHERE seq = 5`}, 5},
		{"a deleted entry", []string{`DELETE FROM ledger_history WHERE seq = 4`}, 5},
		{"two entries swapped", []string{
			`UPDATE ledger_history SET seq = 1000 WHERE seq = 2`,
			`UPDATE ledger_history SET seq = 2 WHERE seq = 3`,
			`UPDATE ledger_history SET seq = 3 WHERE seq = 1000`}, 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			onBackends(t, func(t *testing.T, target string) {
				lives(t, target, 1, 4)
				for _, q := range tc.query {
					tamperWith(t, target, q)
				}
				r := runL(t, target, "verify")
				want(t, r, exitError)
				lines := strings.Split(strings.TrimSpace(r.stdout), "\n")
				if !strings.HasPrefix(lines[0], fmt.Sprintf("entry %d ", tc.first)) {
					t.Errorf("the first line %q does not name entry %d\n%s", lines[0], tc.first, r)
				}
				if !strings.Contains(r.stderr, fmt.Sprintf("the first entry that does not chain is %d", tc.first)) || !strings.Contains(r.stderr, "Stop the writers") {
					t.Errorf("stderr does not name entry %d and what to do:\n%s", tc.first, r.stderr)
				}
				_, rep := verifyJSON(t, target)
				if rep.OK || rep.FirstBad != tc.first {
					t.Errorf("verify --json = first bad %d, ok %v; want %d", rep.FirstBad, rep.OK, tc.first)
				}
			})
		})
	}
}

func TestVerify_RowDisagreeingWithItsHistory(t *testing.T) {
	t.Parallel()
	onBackends(t, func(t *testing.T, target string) {
		lives(t, target, 1, 2)
		tamperWith(t, target, `UPDATE changes SET status = 'pending' WHERE id = 'chg_2'`)
		r := runL(t, target, "verify")
		want(t, r, exitError, "change chg_2")
		if strings.Contains(r.stderr, "does not chain") {
			t.Errorf("a row moved without its entry was reported as a broken chain:\n%s", r)
		}
	})
}

func TestVerify_AfterPrune(t *testing.T) {
	t.Parallel()
	onBackends(t, func(t *testing.T, target string) {
		lives(t, target, 1, 3)
		cp := checkpointOf(t, target)
		want(t, runL(t, target, "prune", "--older-than-days", "0", "--yes"), exitOK, "deleted 3 changes")
		lives(t, target, 4, 1)
		want(t, runL(t, target, "verify"), exitOK, "and 6 links of pruned entries chain")
		// The checkpoint was on an entry the prune deleted: its link holds.
		want(t, runL(t, target, "verify", "--checkpoint", cp.file, "--public-key", cp.public), exitOK, "holds its hash")
	})
}

func TestVerify_CheckpointDetectsAConsistentRewrite(t *testing.T) {
	t.Parallel()
	onBackends(t, func(t *testing.T, target string) {
		lives(t, target, 1, 3)
		cp := checkpointOf(t, target)
		want(t, runL(t, target, "verify", "--checkpoint", cp.file, "--public-key", cp.public), exitOK,
			"checkpoint "+cp.file+": entry 6 holds its hash", "by the --public-key")
		lives(t, target, 4, 1)
		tamperWith(t, target, `UPDATE ledger_history SET actor = 'agent:mallory' WHERE seq = 2`)
		rehash(t, target)
		moveHead(t, target)
		want(t, runL(t, target, "verify"), exitOK) // the rewrite holds together
		r := runL(t, target, "verify", "--checkpoint", cp.file, "--public-key", cp.public)
		want(t, r, exitError, "checkpoint "+cp.file+": entry 6's hash is not the checkpoint's: the history was rewritten after the checkpoint")
		r, rep := verifyJSON(t, target, "--checkpoint", cp.file, "--public-key", cp.public)
		if r.code != exitError || rep.OK || len(rep.Checkpoints) != 1 || rep.Checkpoints[0].OK || !rep.Checkpoints[0].Trusted || rep.FirstBad != 0 {
			t.Fatalf("verify --json = %+v\n%s", rep, r)
		}
	})
}

func TestVerify_CheckpointDetectsAHistoryCutBack(t *testing.T) {
	t.Parallel()
	onBackends(t, func(t *testing.T, target string) {
		lives(t, target, 1, 3)
		cp := checkpointOf(t, target)
		tamperWith(t, target, `DELETE FROM ledger_history WHERE change_id = 'chg_3'`)
		tamperWith(t, target, `DELETE FROM changes WHERE id = 'chg_3'`)
		moveHead(t, target)
		want(t, runL(t, target, "verify"), exitOK, "head: entry 4 ")
		want(t, runL(t, target, "verify", "--checkpoint", cp.file, "--public-key", cp.public), exitError,
			"the history ends at entry 4, before the checkpoint's entry 6")
	})
}

// TestVerify_SeveralCheckpoints: each is checked, the newest holding does
// not excuse an older one.
func TestVerify_SeveralCheckpoints(t *testing.T) {
	t.Parallel()
	target := filepath.Join(t.TempDir(), "ledger.db")
	create(t, target)
	lives(t, target, 1, 1)
	older := checkpointOf(t, target)
	lives(t, target, 2, 1)
	newer := checkpointWith(t, target, older.key)
	want(t, runL(t, target, "verify", "--checkpoint", older.file, "--checkpoint", newer.file, "--public-key", older.public),
		exitOK, "entry 2 holds its hash", "entry 4 holds its hash")
	tamperWith(t, target, `UPDATE ledger_history SET hash = ? WHERE seq = 2`, make([]byte, 32))
	r := runL(t, target, "verify", "--checkpoint", newer.file, "--checkpoint", older.file, "--public-key", older.public)
	want(t, r, exitError, "checkpoint "+older.file+": entry 2's hash is not the checkpoint's")
	if strings.Contains(r.stdout, "checkpoint "+newer.file+":") {
		t.Errorf("the newer checkpoint, which the history still holds, was reported:\n%s", r)
	}
}

// A receipt an agent was given (seq and hash, or the receipt's JSON) holds
// while the history does, and fails once the history was rewritten: a
// consistent rewrite, or a cut back to before it.
func TestVerify_Receipts(t *testing.T) {
	t.Parallel()
	onBackends(t, func(t *testing.T, target string) {
		lives(t, target, 1, 3)
		l := writable(t, target)
		all, err := l.History(context.Background(), ledger.HistoryFilter{})
		if err != nil {
			t.Fatal(err)
		}
		l.Close()
		e := all[3]
		plain := fmt.Sprintf("%d:%s", e.Seq, e.Hash)
		asJSON := fmt.Sprintf(`{"seq":%d,"hash":"%s"}`, e.Seq, e.Hash)
		want(t, runL(t, target, "verify", "--receipt", plain, "--receipt", asJSON), exitOK, fmt.Sprintf("receipt %d: the entry holds its hash", e.Seq))
		r, rep := verifyJSON(t, target, "--receipt", plain)
		if r.code != exitOK || len(rep.Receipts) != 1 || !rep.Receipts[0].OK || rep.Receipts[0].Hash != e.Hash.String() {
			t.Fatalf("verify --json --receipt = %+v\n%s", rep, r)
		}
		// A receipt the history never gave: its hash, or its place.
		other := all[2].Hash.String()
		want(t, runL(t, target, "verify", "--receipt", fmt.Sprintf("%d:%s", e.Seq, other)), exitError,
			fmt.Sprintf("receipt %d: entry %d's hash is not the checkpoint's", e.Seq, e.Seq))
		want(t, runL(t, target, "verify", "--receipt", "99:"+other), exitError, "receipt 99: the history ends at entry 6, before the checkpoint's entry 99")
		// The history rewritten from entry 2 on, consistently.
		tamperWith(t, target, `UPDATE ledger_history SET actor = 'agent:mallory' WHERE seq = 2`)
		rehash(t, target)
		moveHead(t, target)
		want(t, runL(t, target, "verify"), exitOK)
		want(t, runL(t, target, "verify", "--receipt", plain), exitError, fmt.Sprintf("receipt %d: entry %d's hash is not the checkpoint's", e.Seq, e.Seq))
		// Malformed receipts are usage errors.
		for _, bad := range []string{"4", "x:" + other, "4:abc", "0:" + other, `{"seq":"4"}`} {
			wantErr(t, runL(t, target, "verify", "--receipt", bad), "for flag -receipt: ")
		}
	})
}
