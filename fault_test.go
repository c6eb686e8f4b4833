package changeset_test

import (
	"bufio"
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	changeset "github.com/mcp-changeset/changeset-go"
	"github.com/mcp-changeset/changeset-go/internal/faulttest"
	"github.com/mcp-changeset/changeset-go/ledger"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// The fault harness: processes killed with SIGKILL at random points of
// apply and undo, a ledger locked past the busy timeout, read-only,
// damaged or on a full disk, and a clock that jumps. After each fault, no
// change is applied twice, every row keeps the invariants of
// faulttest.RowProblems, the ledger's own check (mcp-changeset check) is
// clean or reports exactly the damage, and every refusal is a clear error.
//
// The long mode (-soak, or CHANGESET_SOAK=1) kills at least 500 processes:
//
//	go test -run '^TestFault' -soak -v .

var soak = flag.Bool("soak", os.Getenv("CHANGESET_SOAK") == "1", "run the fault harness's long mode (at least 500 SIGKILLs)")

// faultKills counts the SIGKILLs of the whole harness, for the log.
var faultKills atomic.Int64

// checkLedger asserts the invariants of every row of l, and that the
// ledger's own check and Verify find nothing.
func checkLedger(t *testing.T, l *ledger.Ledger) {
	t.Helper()
	ctx := context.Background()
	changes, err := l.Changes(ctx, ledger.ChangeFilter{})
	if err != nil {
		t.Fatalf("list: %v", err)
	}
	for _, c := range changes {
		for _, p := range faulttest.RowProblems(c, l.Now(), changeset.DefaultMaxClockSkew) {
			t.Error(p)
		}
	}
	problems, err := l.Check(ctx)
	if err != nil {
		t.Fatalf("check: %v", err)
	}
	for _, p := range problems {
		t.Errorf("check: %s", p)
	}
	// The history's chain holds whatever was cut short: a transaction
	// that did not commit left no entry, one that did left its entries
	// chained.
	v, err := l.Verify(ctx, ledger.VerifyOptions{})
	if err != nil {
		t.Fatalf("verify: %v", err)
	}
	for _, p := range v.Problems {
		t.Errorf("verify: %s", p)
	}
}

// faultIn is the payload of the harness's operations: set Key to Value.
type faultIn struct {
	Key   string `json:"key"`
	Value string `json:"value"`
}

// registerFaultOps registers fault_set, an ordinary operation on files in
// dir (one per key) that logs "A key" and "U key" lines to dir/markers
// before it writes, and fault_tx, a transactional one on the table
// fault_kv, whose applies and undos columns count the writes. Both pause
// for up to 3 ms inside apply and undo, so that kills land there too.
func registerFaultOps(g *changeset.Guard, dir string) error {
	jitter := func() { time.Sleep(time.Duration(rand.IntN(3000)) * time.Microsecond) }
	marker := filepath.Join(dir, "markers")
	file := func(key string) string { return filepath.Join(dir, "state-"+key) }
	changeset.Register(g, &mcp.Tool{Name: "fault_set"}, changeset.Operation[faultIn, faultIn, fileState]{
		AllowEmptyDiff: true, // its diff is not what the test is about
		Preview: func(ctx context.Context, in faultIn) (*changeset.Proposal[faultIn], error) {
			return &changeset.Proposal[faultIn]{Payload: in, Resource: "file:" + in.Key}, nil
		},
		Apply: func(ctx context.Context, p faultIn) (fileState, error) {
			if err := appendLine(marker, "A "+p.Key); err != nil {
				return fileState{}, err
			}
			jitter()
			prev := readFileState(file(p.Key))
			return prev, os.WriteFile(file(p.Key), []byte(p.Value), 0o600)
		},
		Undo: func(ctx context.Context, p faultIn, prev fileState) error {
			if err := appendLine(marker, "U "+p.Key); err != nil {
				return err
			}
			jitter()
			if !prev.Exists {
				return os.Remove(file(p.Key))
			}
			return os.WriteFile(file(p.Key), []byte(prev.Content), 0o600)
		},
		Observe: func(ctx context.Context, p faultIn) (any, error) { return readFileState(file(p.Key)), nil },
	})
	if _, err := g.Ledger().DB().Exec(`CREATE TABLE IF NOT EXISTS fault_kv (
		key TEXT PRIMARY KEY, value TEXT NOT NULL, applies INTEGER NOT NULL, undos INTEGER NOT NULL)`); err != nil {
		return err
	}
	value := func(ctx context.Context, tx *sql.Tx, key string) (string, error) {
		var v string
		if err := tx.QueryRowContext(ctx, `SELECT value FROM fault_kv WHERE key = ?`, key).Scan(&v); err != nil && err != sql.ErrNoRows {
			return "", err
		}
		return v, nil
	}
	changeset.Register(g, &mcp.Tool{Name: "fault_tx"}, changeset.Operation[faultIn, faultIn, faultIn]{
		AllowEmptyDiff: true, // its diff is not what the test is about
		Preview: func(ctx context.Context, in faultIn) (*changeset.Proposal[faultIn], error) {
			return &changeset.Proposal[faultIn]{Payload: in, Resource: "row:" + in.Key}, nil
		},
		ApplyTx: func(ctx context.Context, tx *sql.Tx, p faultIn) (faultIn, error) {
			old, err := value(ctx, tx, p.Key)
			if err != nil {
				return faultIn{}, err
			}
			jitter()
			_, err = tx.ExecContext(ctx, `INSERT INTO fault_kv (key, value, applies, undos) VALUES (?, ?, 1, 0)
				ON CONFLICT (key) DO UPDATE SET value = excluded.value, applies = applies + 1`, p.Key, p.Value)
			return faultIn{Key: p.Key, Value: old}, err
		},
		UndoTx: func(ctx context.Context, tx *sql.Tx, p faultIn, old faultIn) error {
			jitter()
			_, err := tx.ExecContext(ctx, `UPDATE fault_kv SET value = ?, undos = undos + 1 WHERE key = ?`, old.Value, p.Key)
			return err
		},
		ObserveTx: func(ctx context.Context, tx *sql.Tx, p faultIn) (any, error) { return value(ctx, tx, p.Key) },
	})
	return nil
}

// helperFaultKill runs in a process the harness kills: it applies and
// undoes the changes listed in the file CHANGESET_FAULT_WORK ("apply ID
// TOKEN" and "undo ID TOKEN" lines) and prints "applied ID UNDO_TOKEN" after
// each apply, so that the parent learns the undo tokens it may later use.
func helperFaultKill() int {
	g, err := changeset.New(nil, changeset.Options{LedgerPath: os.Getenv("CHANGESET_LEDGER"), WriteMode: changeset.WriteGuarded, Durability: testDurability()})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	if err := registerFaultOps(g, os.Getenv("CHANGESET_FAULT_DIR")); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	work, err := os.ReadFile(os.Getenv("CHANGESET_FAULT_WORK"))
	if err != nil {
		return 1
	}
	fmt.Println("ready")
	ctx := context.Background()
	for _, line := range strings.Split(strings.TrimSpace(string(work)), "\n") {
		f := strings.Fields(line)
		if len(f) != 3 {
			continue
		}
		if f[0] == "apply" {
			if a, err := g.Apply(ctx, f[1], f[2]); err == nil {
				fmt.Printf("applied %s %s\n", f[1], a.UndoToken)
			}
		} else {
			g.Undo(ctx, f[1], f[2])
		}
	}
	return 0
}

// killHarness drives one operation of registerFaultOps through rounds of
// helper processes that it kills at random points, until kills processes
// have been killed. check asserts what the operation's own record shows
// against the ledger after every round.
type killHarness struct {
	t     *testing.T
	op    string
	dir   string
	path  string
	g     *changeset.Guard
	check func(changes []*ledger.Change)

	mu      sync.Mutex
	confirm map[string]string // change ID → confirmation token
	undo    map[string]string // change ID → undo token, once a helper printed it
	keys    int
}

func newKillHarness(t *testing.T, op string) *killHarness {
	dir := t.TempDir()
	h := &killHarness{t: t, op: op, dir: dir, path: filepath.Join(dir, "ledger.db"),
		confirm: map[string]string{}, undo: map[string]string{}}
	g, err := changeset.New(nil, changeset.Options{LedgerPath: h.path, WriteMode: changeset.WriteGuarded, Durability: testDurability()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { g.Close() })
	if err := registerFaultOps(g, dir); err != nil {
		t.Fatal(err)
	}
	h.g = g
	return h
}

// work lists what helpers can do now: apply every pending change, undo
// every applied one whose undo token is known. It previews more changes
// when few are pending.
func (h *killHarness) work() []string {
	ctx := context.Background()
	var out []string
	pending := 0
	for id, token := range h.confirm {
		c, err := h.g.Ledger().Change(ctx, id)
		if err != nil {
			h.t.Fatal(err)
		}
		switch {
		case c.Status == ledger.Pending:
			out = append(out, "apply "+id+" "+token)
			pending++
		case c.Status == ledger.Applied && h.undo[id] != "":
			out = append(out, "undo "+id+" "+h.undo[id])
		}
	}
	for ; pending < 12; pending++ {
		h.keys++
		p, err := h.g.Preview(ctx, h.op, faultIn{Key: fmt.Sprint("k", h.keys), Value: fmt.Sprint("v", h.keys)})
		if err != nil {
			h.t.Fatal(err)
		}
		h.confirm[p.ChangeID] = p.ConfirmationToken
		out = append(out, "apply "+p.ChangeID+" "+p.ConfirmationToken)
	}
	return out
}

// round starts two helpers on the same work, in different orders, and
// kills each at a random moment after it is ready. It returns how many it
// killed before they finished.
func (h *killHarness) round(work []string) int {
	var wg sync.WaitGroup
	var killed atomic.Int64
	for i := range 2 {
		rand.Shuffle(len(work), func(i, j int) { work[i], work[j] = work[j], work[i] })
		file := filepath.Join(h.dir, fmt.Sprintf("work-%d", i))
		if err := os.WriteFile(file, []byte(strings.Join(work, "\n")), 0o600); err != nil {
			h.t.Fatal(err)
		}
		cmd := helperCmd(h.t, "faultkill", h.path, "")
		cmd.Env = append(cmd.Env, "CHANGESET_FAULT_DIR="+h.dir, "CHANGESET_FAULT_WORK="+file)
		out, err := cmd.StdoutPipe()
		if err != nil {
			h.t.Fatal(err)
		}
		if err := cmd.Start(); err != nil {
			h.t.Fatal(err)
		}
		wg.Go(func() {
			sc := bufio.NewScanner(out)
			if !sc.Scan() || sc.Text() != "ready" {
				cmd.Wait()
				h.t.Errorf("helper did not start: %q", sc.Text())
				return
			}
			timer := time.AfterFunc(time.Duration(rand.IntN(40_000))*time.Microsecond, func() { cmd.Process.Signal(syscall.SIGKILL) })
			for sc.Scan() {
				if f := strings.Fields(sc.Text()); len(f) == 3 && f[0] == "applied" {
					h.mu.Lock()
					h.undo[f[1]] = f[2]
					h.mu.Unlock()
				}
			}
			timer.Stop()
			err := cmd.Wait()
			var exit *exec.ExitError
			if errors.As(err, &exit) && exit.Sys().(syscall.WaitStatus).Signal() == syscall.SIGKILL {
				killed.Add(1)
			} else if err != nil {
				h.t.Errorf("helper: %v", err)
			}
		})
	}
	wg.Wait()
	return int(killed.Load())
}

// run kills until kills processes died mid-work, checking after each
// round; then it reconciles what the kills left in flight and checks once
// more.
func (h *killHarness) run(kills int) {
	ctx := context.Background()
	l := h.g.Ledger()
	n := 0
	for round := 0; n < kills; round++ {
		if round > 4*kills {
			h.t.Fatalf("only %d of %d helpers were killed mid-work in %d rounds", n, kills, round)
		}
		n += h.round(h.work())
		changes, err := l.Changes(ctx, ledger.ChangeFilter{})
		if err != nil {
			h.t.Fatal(err)
		}
		h.check(changes)
		checkLedger(h.t, l)
		if h.t.Failed() {
			h.t.FailNow()
		}
	}
	inFlight, err := l.Changes(ctx, ledger.ChangeFilter{Statuses: []ledger.Status{ledger.Applying, ledger.Undoing}})
	if err != nil {
		h.t.Fatal(err)
	}
	for _, c := range inFlight {
		r, err := l.Reconcile(ctx, c.ID, "fault harness: the process was killed", "operator:test")
		if err != nil || (r.Status != ledger.ApplyFailed && r.Status != ledger.UndoFailed) {
			h.t.Fatalf("reconcile %s: %v %v", c.ID, r, err)
		}
	}
	changes, _ := l.Changes(ctx, ledger.ChangeFilter{})
	h.check(changes)
	checkLedger(h.t, l)
	counts := map[ledger.Status]int{}
	for _, c := range changes {
		counts[c.Status]++
	}
	total := faultKills.Add(int64(n))
	h.t.Logf("%d SIGKILLs (%d so far in the harness); %d changes: %v; %d left in flight, reconciled", n, total, len(changes), counts, len(inFlight))
}

func faultKillTarget(quick, long int) int {
	if *soak {
		return long
	}
	return quick
}

func TestFault_SIGKILLDuringApplyAndUndoNeverAppliesTwice(t *testing.T) {
	if testing.Short() {
		t.Skip("kills processes")
	}
	eachDurability(t, func(t *testing.T) {
		h := newKillHarness(t, "fault_set")
		// Every apply and undo writes its marker line before its effect, so
		// the markers bound what happened: a change was applied at most once
		// and undone at most once, and its status agrees with its markers.
		h.check = func(changes []*ledger.Change) {
			data, _ := os.ReadFile(filepath.Join(h.dir, "markers"))
			marks := map[string]int{}
			for _, line := range strings.Split(strings.TrimSpace(string(data)), "\n") {
				marks[line]++
			}
			for _, c := range changes {
				key := payloadKey(t, c)
				a, u := marks["A "+key], marks["U "+key]
				ok := a <= 1 && u <= 1
				switch c.Status {
				case ledger.Pending, ledger.Expired:
					ok = ok && a == 0 && u == 0
				case ledger.Applied:
					ok = ok && a == 1 && u == 0
				case ledger.Applying, ledger.ApplyFailed:
					ok = ok && u == 0
				case ledger.Undoing, ledger.UndoFailed:
					ok = ok && a == 1
				case ledger.Undone:
					ok = ok && a == 1 && u == 1
				}
				if !ok {
					t.Errorf("change %s (%s) of %s: %d applies and %d undos ran", c.ID, c.Status, key, a, u)
				}
			}
		}
		h.run(faultKillTarget(40, 350))
	})
}

func TestFault_SIGKILLDuringTransactionalApplyAndUndoLeavesNothingInFlight(t *testing.T) {
	if testing.Short() {
		t.Skip("kills processes")
	}
	eachDurability(t, func(t *testing.T) {
		h := newKillHarness(t, "fault_tx")
		// The writes commit with the ledger's record or not at all: a pending
		// change wrote nothing, an applied one exactly one apply, an undone
		// one one apply and one undo, and nothing is ever in flight.
		h.check = func(changes []*ledger.Change) {
			for _, c := range changes {
				key := payloadKey(t, c)
				var applies, undos int
				err := h.g.Ledger().DB().QueryRow(`SELECT applies, undos FROM fault_kv WHERE key = ?`, key).Scan(&applies, &undos)
				if err != nil && err != sql.ErrNoRows {
					t.Fatal(err)
				}
				want, known := map[ledger.Status][2]int{ledger.Pending: {0, 0}, ledger.Applied: {1, 0}, ledger.Undone: {1, 1}}[c.Status]
				if !known || [2]int{applies, undos} != want {
					t.Errorf("change %s (%s) of %s: %d applies and %d undos committed", c.ID, c.Status, key, applies, undos)
				}
			}
		}
		h.run(faultKillTarget(20, 200))
	})
}

// payloadKey is the key of a harness change.
func payloadKey(t *testing.T, c *ledger.Change) string {
	var in faultIn
	if err := json.Unmarshal(c.Payload, &in); err != nil {
		t.Fatalf("payload of %s: %v", c.ID, err)
	}
	return in.Key
}

// helperFaultLock holds the write lock of the SQLite file CHANGESET_LEDGER
// (BEGIN IMMEDIATE, as the ledger's own writers take it) until its standard
// input closes.
func helperFaultLock() int {
	db, err := sql.Open("sqlite", "file:"+os.Getenv("CHANGESET_LEDGER")+"?_pragma=busy_timeout(5000)")
	if err != nil {
		return 1
	}
	defer db.Close()
	ctx := context.Background()
	conn, err := db.Conn(ctx)
	if err != nil {
		return 1
	}
	if _, err := conn.ExecContext(ctx, "BEGIN IMMEDIATE"); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	fmt.Println("locked")
	io.Copy(io.Discard, os.Stdin)
	conn.ExecContext(ctx, "ROLLBACK")
	return 0
}
