package main

import (
	"bufio"
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	changeset "github.com/mcp-changeset/changeset-go"
	"github.com/mcp-changeset/changeset-go/examples/internal/exampletest"
	"github.com/mcp-changeset/changeset-go/ledger"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

func TestMain(m *testing.M) {
	switch os.Getenv("TICKETS_HELPER") {
	case "":
		exampletest.Main(m)
	case "apply":
		os.Exit(helperApply())
	default:
		os.Exit(3)
	}
}

// openTracker opens the ledger at path as a Guard with the tracker's
// operations, without a server.
func openTracker(t testing.TB, path string) (*changeset.Guard, *tracker) {
	g, err := changeset.New(nil, changeset.Options{LedgerPath: path, WriteMode: changeset.WriteGuarded, Durability: testDurability()})
	if err != nil {
		t.Fatal(err)
	}
	tr := &tracker{db: g.Ledger().DB()}
	if err := tr.migrate(context.Background()); err != nil {
		t.Fatal(err)
	}
	tr.register(mcp.NewServer(&mcp.Implementation{Name: "x", Version: "1"}, nil), g)
	return g, tr
}

// helperApply applies every change in TICKETS_CHANGES (id=token,...) in a
// random order with a random pause inside each transaction, printing
// "ok ID" for each apply that succeeded. The parent kills it at random.
func helperApply() int {
	g, err := changeset.New(nil, changeset.Options{LedgerPath: os.Getenv("TICKETS_LEDGER"), WriteMode: changeset.WriteGuarded, Durability: testDurability()})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	tr := &tracker{db: g.Ledger().DB(), hook: func() { time.Sleep(time.Duration(rand.IntN(3000)) * time.Microsecond) }}
	tr.register(mcp.NewServer(&mcp.Implementation{Name: "x", Version: "1"}, nil), g)
	fmt.Println("ready") // the parent starts its kill timer now
	pairs := strings.Split(os.Getenv("TICKETS_CHANGES"), ",")
	rand.Shuffle(len(pairs), func(i, j int) { pairs[i], pairs[j] = pairs[j], pairs[i] })
	for _, p := range pairs {
		id, token, _ := strings.Cut(p, "=")
		if _, err := g.Apply(context.Background(), id, token); err == nil {
			fmt.Printf("ok %s\n", id)
		}
	}
	return 0
}

// durabilityEnv names the ledger durability of the tests' Guards and of
// their helper processes ("full" when unset); eachDurability sets it.
const durabilityEnv = "TICKETS_TEST_DURABILITY"

// testDurability is the durability durabilityEnv names.
func testDurability() ledger.Durability {
	var d ledger.Durability
	if v := os.Getenv(durabilityEnv); v != "" {
		if err := d.Set(v); err != nil {
			panic(err)
		}
	}
	return d
}

// eachDurability runs fn once per ledger durability, as subtests named
// after them: at-most-once holds whether or not the commits that claim
// nothing wait for the disk.
func eachDurability(t *testing.T, fn func(t *testing.T)) {
	for _, d := range []ledger.Durability{ledger.DurabilityFull, ledger.DurabilityClaims} {
		t.Run(d.String(), func(t *testing.T) {
			t.Setenv(durabilityEnv, d.String())
			fn(t)
		})
	}
}

func helper(path string, pairs []string) *exec.Cmd {
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), "TICKETS_HELPER=apply", "TICKETS_LEDGER="+path, "TICKETS_CHANGES="+strings.Join(pairs, ","))
	return cmd
}

// previewCreates previews n creates and returns "id=token" pairs.
func previewCreates(t *testing.T, g *changeset.Guard, n int) []string {
	var pairs []string
	for i := range n {
		p, err := g.Preview(context.Background(), "create_ticket", createIn{Title: fmt.Sprintf("ticket %d", i)})
		if err != nil {
			t.Fatal(err)
		}
		pairs = append(pairs, p.ChangeID+"="+p.ConfirmationToken)
	}
	return pairs
}

func TestTx_SIGKILLAtRandomPointsNeverLeavesApplyingOrAppliesTwice(t *testing.T) {
	if testing.Short() {
		t.Skip("kills processes")
	}
	eachDurability(t, func(t *testing.T) {
		path := filepath.Join(t.TempDir(), "ledger.db")
		g, tr := openTracker(t, path)
		defer g.Close()
		pairs := previewCreates(t, g, 150)
		ctx := context.Background()

		kills := 0
		for round := 0; round < 400; round++ {
			var remaining []string
			for _, p := range pairs {
				id, _, _ := strings.Cut(p, "=")
				if c, _ := g.Ledger().Change(ctx, id); c.Status == ledger.Pending {
					remaining = append(remaining, p)
				}
			}
			if len(remaining) == 0 {
				break
			}
			cmd := helper(path, remaining)
			stdout, err := cmd.StdoutPipe()
			if err != nil {
				t.Fatal(err)
			}
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			lines := bufio.NewScanner(stdout)
			lines.Scan() // "ready": the helper opened the ledger
			done := make(chan error, 1)
			go func() {
				for lines.Scan() {
				}
				done <- cmd.Wait()
			}()
			select {
			case <-done:
			case <-time.After(time.Duration(15+rand.IntN(25)) * time.Millisecond):
				cmd.Process.Kill() // SIGKILL
				<-done
				kills++
			}
			// After every kill: nothing in flight, and the tickets table agrees
			// with the ledger.
			checkTxInvariants(t, g, tr, pairs)
		}
		checkTxInvariants(t, g, tr, pairs)
		if kills < 5 {
			t.Fatalf("only %d helpers were killed mid-work; the test proved little", kills)
		}
		t.Logf("%d SIGKILLs", kills)
	})
}

// checkTxInvariants: no change is applying; a change is applied exactly
// when its ticket exists; every other change is pending with no ticket.
func checkTxInvariants(t *testing.T, g *changeset.Guard, tr *tracker, pairs []string) {
	t.Helper()
	ctx := context.Background()
	for _, p := range pairs {
		id, _, _ := strings.Cut(p, "=")
		c, err := g.Ledger().Change(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		var payload createPayload
		if err := jsonUnmarshal(c.Payload, &payload); err != nil {
			t.Fatal(err)
		}
		tk, exists, err := get(ctx, tr.db, payload.ID)
		if err != nil {
			t.Fatal(err)
		}
		switch c.Status {
		case ledger.Applied:
			if !exists || tk.Version != 1 {
				t.Fatalf("%s applied but ticket %d: exists %v version %d", id, payload.ID, exists, tk.Version)
			}
		case ledger.Pending:
			if exists {
				t.Fatalf("%s pending but ticket %d exists", id, payload.ID)
			}
		default:
			t.Fatalf("%s is %s after a kill", id, c.Status)
		}
	}
}

func TestTx_ProcessesRacingOneTokenApplyOnce(t *testing.T) {
	if testing.Short() {
		t.Skip("starts processes")
	}
	eachDurability(t, func(t *testing.T) {
		path := filepath.Join(t.TempDir(), "ledger.db")
		g, tr := openTracker(t, path)
		defer g.Close()
		pairs := previewCreates(t, g, 30)
		var wg sync.WaitGroup
		var mu sync.Mutex
		wins := map[string]int{}
		for range 4 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				out, err := helper(path, pairs).Output()
				if err != nil {
					t.Errorf("helper: %v", err)
				}
				mu.Lock()
				defer mu.Unlock()
				for _, l := range strings.Split(strings.TrimSpace(string(out)), "\n") {
					if id, ok := strings.CutPrefix(l, "ok "); ok { // "ready" and the rest are ignored
						wins[id]++
					}
				}
			}()
		}
		wg.Wait()
		for _, p := range pairs {
			id, _, _ := strings.Cut(p, "=")
			if wins[id] != 1 {
				t.Errorf("%s applied %d times", id, wins[id])
			}
		}
		checkTxInvariants(t, g, tr, pairs)
	})
}

// env is the tracker behind an in-memory MCP client.
type env struct {
	t     *testing.T
	path  string
	guard *changeset.Guard
	tr    *tracker
	cs    *mcp.ClientSession
}

func newEnv(t *testing.T) *env {
	e := &env{t: t, path: filepath.Join(t.TempDir(), "ledger.db")}
	server := mcp.NewServer(&mcp.Implementation{Name: "tickets", Version: "1"}, nil)
	g, err := changeset.New(server, changeset.Options{LedgerPath: e.path, WriteMode: changeset.WriteGuarded})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { g.Close() })
	e.guard, e.tr = g, &tracker{db: g.Ledger().DB()}
	if err := e.tr.migrate(context.Background()); err != nil {
		t.Fatal(err)
	}
	e.tr.register(server, g)
	st, ct := mcp.NewInMemoryTransports()
	if _, err := server.Connect(context.Background(), st, nil); err != nil {
		t.Fatal(err)
	}
	e.cs, err = mcp.NewClient(&mcp.Implementation{Name: "c", Version: "1"}, nil).Connect(context.Background(), ct, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.cs.Close() })
	return e
}

func (e *env) call(name string, args map[string]any) (map[string]any, string) {
	e.t.Helper()
	res, err := e.cs.CallTool(context.Background(), &mcp.CallToolParams{Name: name, Arguments: args})
	if err != nil {
		e.t.Fatalf("%s: %v", name, err)
	}
	if res.IsError {
		return nil, res.Content[0].(*mcp.TextContent).Text
	}
	var out map[string]any
	exampletest.Decode(e.t, res.StructuredContent, &out)
	return out, ""
}

func (e *env) must(name string, args map[string]any) map[string]any {
	e.t.Helper()
	out, errText := e.call(name, args)
	if errText != "" {
		e.t.Fatalf("%s: %s", name, errText)
	}
	return out
}

// change previews and applies one change, in run when run is not empty.
func (e *env) change(run, op string, args map[string]any) string {
	e.t.Helper()
	if run != "" {
		args["run_id"] = run
	}
	p := e.must("preview_"+op, args)
	e.must("apply_change", map[string]any{"change_id": p["change_id"], "confirmation_token": p["confirmation_token"]})
	return p["change_id"].(string)
}

// dump is every row of the tickets table and of the ledger's tables, as
// text, read through a connection of its own. Run rows leave out the
// dry run's token columns, which a dry run is meant to set.
func (e *env) dump() string {
	e.t.Helper()
	db, err := sql.Open("sqlite", "file:"+e.path+"?mode=ro")
	if err != nil {
		e.t.Fatal(err)
	}
	defer db.Close()
	var b strings.Builder
	for _, q := range []string{
		"SELECT * FROM tickets ORDER BY id",
		"SELECT * FROM changes ORDER BY id",
		"SELECT id, label, scope_hash, status, report, undone_by, created_at FROM runs ORDER BY id",
	} {
		rows, err := db.Query(q)
		if err != nil {
			e.t.Fatal(err)
		}
		cols, _ := rows.Columns()
		for rows.Next() {
			vals := make([]any, len(cols))
			ptrs := make([]any, len(cols))
			for i := range vals {
				ptrs[i] = &vals[i]
			}
			rows.Scan(ptrs...)
			fmt.Fprintln(&b, vals...)
		}
		rows.Close()
	}
	return b.String()
}

func TestTx_DryRunOfRunUndoChangesNothingAndPredictsTheUndo(t *testing.T) {
	e := newEnv(t)
	e.change("", "create_ticket", map[string]any{"title": "existing"}) // #1
	run := e.must("start_run", map[string]any{"label": "triage"})["run_id"].(string)
	e.change(run, "create_ticket", map[string]any{"title": "new"})                                         // #2
	e.change(run, "update_ticket", map[string]any{"id": 1, "title": "existing!", "status": "in_progress"}) // #1 v2
	e.change(run, "update_ticket", map[string]any{"id": 2, "title": "new!", "status": "closed"})           // #2 v2
	e.change(run, "delete_ticket", map[string]any{"id": 1})
	before := e.dump()

	dry := e.must("undo_run", map[string]any{"run_id": run})
	if after := e.dump(); after != before {
		t.Fatalf("the dry run changed the database:\nbefore:\n%s\nafter:\n%s", before, after)
	}
	for _, s := range dry["will_undo"].([]any) {
		if s.(map[string]any)["transactional"] != true {
			t.Fatalf("step not marked transactional: %v", s)
		}
	}
	real := e.must("undo_run", map[string]any{"run_id": run, "dry_run": false, "confirmation_token": dry["confirmation_token"]})
	for _, k := range []string{"confirmation_token", "expires_at", "next_step", "dry_run", "status", "undone_by"} {
		delete(dry, k)
		delete(real, k)
	}
	dry["undone"] = dry["will_undo"]
	delete(dry, "will_undo")
	if !reflect.DeepEqual(dry, real) {
		t.Fatalf("dry run report %v\n!= real undo report %v", dry, real)
	}
	tickets := e.must("list_tickets", nil)["tickets"].([]any)
	if len(tickets) != 1 {
		t.Fatalf("tickets after undo: %v", tickets)
	}
	if tk := tickets[0].(map[string]any); tk["id"] != 1.0 || tk["title"] != "existing" || tk["status"] != "open" {
		t.Fatalf("ticket #1 after undo: %v", tk)
	}
}

func TestTx_UndoOfDeleteRestoresIDAndCreationTime(t *testing.T) {
	e := newEnv(t)
	e.change("", "create_ticket", map[string]any{"title": "keep me"})
	before := e.must("list_tickets", nil)["tickets"].([]any)[0]
	p := e.must("preview_delete_ticket", map[string]any{"id": 1})
	a := e.must("apply_change", map[string]any{"change_id": p["change_id"], "confirmation_token": p["confirmation_token"]})
	if n := len(e.must("list_tickets", nil)["tickets"].([]any)); n != 0 {
		t.Fatal("not deleted")
	}
	e.must("undo_change", map[string]any{"change_id": p["change_id"], "undo_token": a["undo_token"]})
	after := e.must("list_tickets", nil)["tickets"].([]any)[0]
	if !reflect.DeepEqual(before, after) {
		t.Fatalf("restored %v, want %v", after, before)
	}
}

// otherConnection edits a ticket the way another program sharing the
// database would.
func (e *env) otherConnection(stmt string, args ...any) {
	e.t.Helper()
	db, err := sql.Open("sqlite", "file:"+e.path+"?_pragma=busy_timeout(5000)")
	if err != nil {
		e.t.Fatal(err)
	}
	defer db.Close()
	if _, err := db.Exec(stmt, args...); err != nil {
		e.t.Fatal(err)
	}
}

func TestTx_EditByAnotherConnection(t *testing.T) {
	e := newEnv(t)
	e.change("", "create_ticket", map[string]any{"title": "one"})
	e.change("", "create_ticket", map[string]any{"title": "two"})

	// Between preview and apply: refused, nothing written.
	p := e.must("preview_update_ticket", map[string]any{"id": 1, "title": "agent's", "status": "closed"})
	e.otherConnection("UPDATE tickets SET title = 'person''s', version = version + 1 WHERE id = 1")
	_, errText := e.call("apply_change", map[string]any{"change_id": p["change_id"], "confirmation_token": p["confirmation_token"]})
	if !strings.Contains(errText, "changed after the preview") {
		t.Fatalf("apply after an edit: %q", errText)
	}
	if tk, _, _ := get(context.Background(), e.tr.db, 1); tk.Title != "person's" || tk.Status != "open" {
		t.Fatalf("ticket 1 = %+v", tk)
	}
	if st := e.must("get_change_status", map[string]any{"change_id": p["change_id"]}); st["status"] != "apply_failed" {
		t.Fatalf("status = %v", st["status"])
	}

	// Between apply and a run's undo: that change is skipped.
	run := e.must("start_run", map[string]any{"label": "edits"})["run_id"].(string)
	c1 := e.change(run, "update_ticket", map[string]any{"id": 1, "title": "A", "status": "open"})
	c2 := e.change(run, "update_ticket", map[string]any{"id": 2, "title": "B", "status": "open"})
	e.otherConnection("UPDATE tickets SET status = 'closed', version = version + 1 WHERE id = 2")
	dry := e.must("undo_run", map[string]any{"run_id": run})
	rep := e.must("undo_run", map[string]any{"run_id": run, "dry_run": false, "confirmation_token": dry["confirmation_token"]})
	skipped := rep["skipped"].([]any)
	if len(skipped) != 1 || skipped[0].(map[string]any)["change_id"] != c2 {
		t.Fatalf("skipped = %v", skipped)
	}
	if undone := rep["undone"].([]any); len(undone) != 1 || undone[0].(map[string]any)["change_id"] != c1 {
		t.Fatalf("undone = %v", rep["undone"])
	}
	if tk, _, _ := get(context.Background(), e.tr.db, 2); tk.Status != "closed" || tk.Title != "B" {
		t.Fatalf("the person's edit was overwritten: %+v", tk)
	}
}

func TestTx_FailedApplyRollsBackAndSpendsToken(t *testing.T) {
	e := newEnv(t)
	e.change("", "create_ticket", map[string]any{"title": "one"})
	p := e.must("preview_update_ticket", map[string]any{"id": 1, "title": "x", "status": "closed"})
	// A failing Apply after a write: the write must roll back.
	e.tr.hook = func() {
		e.tr.hook = nil
		panic("boom")
	}
	_, errText := e.call("apply_change", map[string]any{"change_id": p["change_id"], "confirmation_token": p["confirmation_token"]})
	if !strings.Contains(errText, "crashed (panicked)") || strings.Contains(errText, "changeset.") {
		t.Fatalf("apply: %q", errText)
	}
	if st := e.must("get_change_status", map[string]any{"change_id": p["change_id"]}); st["status"] != "apply_failed" {
		t.Fatalf("status = %v", st)
	}
	_, errText = e.call("apply_change", map[string]any{"change_id": p["change_id"], "confirmation_token": p["confirmation_token"]})
	if !strings.Contains(errText, "(status: apply_failed)") {
		t.Fatalf("token not spent: %q", errText)
	}
	if tk, _, _ := get(context.Background(), e.tr.db, 1); tk.Title != "one" || tk.Version != 1 {
		t.Fatalf("ticket = %+v", tk)
	}
}

func TestStdio_TicketsBinary(t *testing.T) {
	c := exampletest.Start(t, "tickets", nil, exampletest.Guarded)
	c.HasTools("preview_create_ticket", "preview_update_ticket", "preview_delete_ticket", "list_tickets", "start_run", "undo_run")
	p := c.Preview("create_ticket", map[string]any{"title": "from stdio"})
	a := c.Apply(p)
	if got := c.Must("list_tickets", nil)["tickets"].([]any); len(got) != 1 {
		t.Fatalf("tickets = %v", got)
	}
	c.Undo(a)
	if got := c.Must("list_tickets", nil)["tickets"].([]any); len(got) != 0 {
		t.Fatalf("tickets after undo = %v", got)
	}
	c.Refused("preview_update_ticket", map[string]any{"id": 99, "title": "x", "status": "open"}, "no ticket #99")
	c.Refused("preview_update_ticket", map[string]any{"id": 1, "title": "x", "status": "weird"}, "unknown status")
}

func jsonUnmarshal(b []byte, v any) error { return json.Unmarshal(b, v) }
