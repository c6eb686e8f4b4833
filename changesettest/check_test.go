package changesettest_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	changeset "github.com/mcp-changeset/changeset-go"
	"github.com/mcp-changeset/changeset-go/changesettest"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// recorder is a testing.TB that records the failures CheckOperation
// reports instead of failing the test.
type recorder struct {
	testing.TB
	mu     sync.Mutex
	errors []string
}

func (r *recorder) Helper() {}

func (r *recorder) Errorf(format string, args ...any) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.errors = append(r.errors, fmt.Sprintf(format, args...))
}

func (r *recorder) Error(args ...any) { r.Errorf("%s", fmt.Sprint(args...)) }

func (r *recorder) Fatalf(format string, args ...any) {
	r.Errorf(format, args...)
	r.TB.Fatalf("CheckOperation called Fatalf: "+format, args...)
}

func (r *recorder) Failed() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.errors) > 0
}

// kv is a store of string values by key.
type kv struct {
	mu sync.Mutex
	m  map[string]string
}

func (s *kv) get(k string) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.m[k]
}

func (s *kv) set(k, v string) (old string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	old = s.m[k]
	s.m[k] = v
	return old
}

type setIn struct {
	Key   string `json:"key"`
	Value string `json:"value"`
}

type prev struct {
	Value string `json:"previous"`
}

// flaw makes the operation wrong in one way.
type flaw int

const (
	none          flaw = iota
	brokenUndo         // the undo does not put the old value back
	blindObserve       // Observe reads another key
	previewSets        // the preview writes the new value
	previewCounts      // the preview bumps a counter that Observe reports
)

// setOp is a settings operation with the flaw f.
func setOp(s *kv, f flaw) changeset.Operation[setIn, setIn, prev] {
	return changeset.Operation[setIn, setIn, prev]{
		Preview: func(ctx context.Context, in setIn) (*changeset.Proposal[setIn], error) {
			old := s.get(in.Key)
			switch f {
			case previewSets:
				s.set(in.Key, in.Value)
			case previewCounts:
				s.set("reads:"+in.Key, s.get("reads:"+in.Key)+"x")
			}
			return &changeset.Proposal[setIn]{
				Payload: in,
				Diff:    changeset.DiffFields(map[string]any{in.Key: old}, map[string]any{in.Key: in.Value}),
			}, nil
		},
		Apply: func(ctx context.Context, p setIn) (prev, error) { return prev{s.set(p.Key, p.Value)}, nil },
		Undo: func(ctx context.Context, p setIn, r prev) error {
			if f == brokenUndo {
				s.set(p.Key, r.Value+"!")
				return nil
			}
			s.set(p.Key, r.Value)
			return nil
		},
		Observe: func(ctx context.Context, p setIn) (any, error) {
			switch f {
			case blindObserve:
				return s.get("other"), nil
			case previewCounts:
				return []string{s.get(p.Key), s.get("reads:" + p.Key)}, nil
			}
			return s.get(p.Key), nil
		},
	}
}

// checkSet runs CheckOperation on a settings operation with the flaw f and
// returns what it reported.
func checkSet(t *testing.T, f flaw) []string {
	t.Helper()
	s := &kv{m: map[string]string{"theme": "light", "language": "en"}}
	g := changesettest.NewGuard(t, changeset.Options{})
	changeset.Register(g.Guard, &mcp.Tool{Name: "set_setting"}, setOp(s, f))
	r := &recorder{TB: t}
	changesettest.CheckOperation(r, g, "set_setting", setIn{"theme", "dark"}, map[string]any{"key": "language", "value": "fr"})
	if f == none && (s.get("theme") != "light" || s.get("language") != "en") {
		t.Errorf("after CheckOperation the store holds %v, want what it applied undone", s.m)
	}
	return r.errors
}

func wantFailure(t *testing.T, errs []string, want string) {
	t.Helper()
	if len(errs) == 0 {
		t.Fatalf("CheckOperation passed, want a failure with %q", want)
	}
	for _, e := range errs {
		if !strings.Contains(e, want) {
			t.Errorf("CheckOperation reported %q, want %q", e, want)
		}
	}
	t.Logf("reported: %s", strings.Join(errs, "\n"))
}

func TestCheckOperation_PassesACorrectOperation(t *testing.T) {
	if errs := checkSet(t, none); len(errs) > 0 {
		t.Fatalf("CheckOperation failed a correct operation:\n%s", strings.Join(errs, "\n"))
	}
}

func TestCheckOperation_FailsABrokenInverse(t *testing.T) {
	errs := checkSet(t, brokenUndo)
	wantFailure(t, errs, "the undo did not restore the state")
	if len(errs) != 2 || !strings.Contains(errs[0], `input 1 {"key":"theme","value":"dark"}: the undo did not restore the state: before the apply Observe returned "light", after the undo "light!"`) {
		t.Errorf("CheckOperation reported %q, want one failure per input naming the input and both states", errs)
	}
}

func TestCheckOperation_FailsAnObserveThatDoesNotSeeTheApply(t *testing.T) {
	wantFailure(t, checkSet(t, blindObserve), "Observe does not see the apply")
}

func TestCheckOperation_FailsAPreviewThatWritesTheChange(t *testing.T) {
	wantFailure(t, checkSet(t, previewSets), "a preview writes: a second preview of the same input was refused")
}

func TestCheckOperation_FailsAPreviewThatWritesWhatObserveSees(t *testing.T) {
	wantFailure(t, checkSet(t, previewCounts), `a preview writes: Observe returned [`)
	if errs := checkSet(t, previewCounts); !strings.Contains(errs[0], `["light","x"] after one preview and ["light","xxx"] after two more`) {
		t.Errorf("the report does not show both reads: %s", errs[0])
	}
}

// todos is a list whose create operation chooses the id at preview, as
// examples/todo's does.
type todos struct {
	mu    sync.Mutex
	next  int
	items map[int]string
}

type createIn struct {
	Title string `json:"title"`
}

type created struct {
	ID    int    `json:"id"`
	Title string `json:"title"`
}

func (l *todos) state(id int) any {
	l.mu.Lock()
	defer l.mu.Unlock()
	if v, ok := l.items[id]; ok {
		return v
	}
	return nil
}

func (l *todos) put(id int, title *string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if title == nil {
		delete(l.items, id)
		return
	}
	l.items[id] = *title
}

func createOp(l *todos, guarded bool) changeset.Operation[createIn, created, created] {
	return changeset.Operation[createIn, created, created]{
		Preview: func(ctx context.Context, in createIn) (*changeset.Proposal[created], error) {
			l.mu.Lock()
			l.next++
			id := l.next
			l.mu.Unlock()
			return &changeset.Proposal[created]{
				Payload: created{id, in.Title},
				Diff:    changeset.DiffFields(nil, map[string]any{"title": in.Title}),
			}, nil
		},
		Apply: func(ctx context.Context, p created) (created, error) {
			l.put(p.ID, &p.Title)
			return p, nil
		},
		Undo: func(ctx context.Context, p created, _ created) error {
			l.put(p.ID, nil)
			return nil
		},
		Observe: func(ctx context.Context, p created) (any, error) {
			if !guarded {
				return "constant", nil
			}
			return l.state(p.ID), nil
		},
	}
}

func TestCheckOperation_AFreshIDNeedsMutate(t *testing.T) {
	l := &todos{items: map[int]string{}}
	g := changesettest.NewGuard(t, changeset.Options{})
	changeset.Register(g.Guard, &mcp.Tool{Name: "create_todo"}, createOp(l, true))

	r := &recorder{TB: t}
	changesettest.CheckOperation(r, g, "create_todo", createIn{"milk"})
	wantFailure(t, r.errors, "two previews of the same input stored different payloads")

	r = &recorder{TB: t}
	changesettest.CheckOperation(r, g, "create_todo", changesettest.Input{
		Args: createIn{"milk"},
		Mutate: func(payload json.RawMessage) error {
			var p created
			if err := json.Unmarshal(payload, &p); err != nil {
				return err
			}
			title := "written by hand"
			l.put(p.ID, &title)
			return nil
		},
	})
	if len(r.errors) > 0 {
		t.Fatalf("CheckOperation with Mutate failed:\n%s", strings.Join(r.errors, "\n"))
	}
}

// A create's previews store a new id each time, so only a read through
// Observe (Guard.Observe) can tell that its undo leaves the record behind.
func TestCheckOperation_FailsABrokenUndoOfACreate(t *testing.T) {
	l := &todos{items: map[int]string{}}
	g := changesettest.NewGuard(t, changeset.Options{})
	op := createOp(l, true)
	op.Undo = func(ctx context.Context, p created, _ created) error {
		emptied := ""
		l.put(p.ID, &emptied) // clears the title, keeps the record
		return nil
	}
	changeset.Register(g.Guard, &mcp.Tool{Name: "create_todo"}, op)
	r := &recorder{TB: t}
	changesettest.CheckOperation(r, g, "create_todo", changesettest.Input{
		Args:   createIn{"milk"},
		Mutate: func(json.RawMessage) error { return nil },
	})
	wantFailure(t, r.errors, `the undo did not restore the state: before the apply Observe returned null, after the undo ""`)
}

func TestCheckOperation_FailsAnApplyAfterMutate(t *testing.T) {
	l := &todos{items: map[int]string{}}
	g := changesettest.NewGuard(t, changeset.Options{})
	changeset.Register(g.Guard, &mcp.Tool{Name: "create_todo"}, createOp(l, false))
	r := &recorder{TB: t}
	changesettest.CheckOperation(r, g, "create_todo", changesettest.Input{
		Args:   createIn{"milk"},
		Mutate: func(json.RawMessage) error { return nil },
	})
	wantFailure(t, r.errors, "Observe does not see the apply")
}

func TestGuard_HelpersCallTheRealTools(t *testing.T) {
	s := &kv{m: map[string]string{"theme": "light"}}
	g := changesettest.NewGuard(t, changeset.Options{Prefix: "app_"})
	changeset.Register(g.Guard, &mcp.Tool{Name: "set_setting"}, setOp(s, none))

	p, err := g.Preview("set_setting", setIn{"theme", "dark"})
	if err != nil {
		t.Fatal(err)
	}
	a, err := g.Apply(p)
	if err != nil || s.get("theme") != "dark" {
		t.Fatalf("apply: %v, theme %q", err, s.get("theme"))
	}
	if _, err := g.Apply(p); err == nil || !strings.Contains(err.Error(), "cannot be applied") {
		t.Fatalf("a replayed apply: %v", err)
	}
	if _, err := g.Undo(a); err != nil || s.get("theme") != "light" {
		t.Fatalf("undo: %v, theme %q", err, s.get("theme"))
	}

	// Tokens expire on the fake clock.
	p, err = g.Preview("set_setting", setIn{"theme", "dark"})
	if err != nil {
		t.Fatal(err)
	}
	g.Clock.Advance(time.Hour)
	if _, err := g.Apply(p); err == nil || !strings.Contains(err.Error(), "expired") {
		t.Fatalf("an apply after the token's expiry: %v", err)
	}
	var st changeset.ChangeStatus
	if err := g.Call("get_change_status", map[string]any{"change_id": p.ChangeID}, &st); err != nil || st.Status != "expired" {
		t.Fatalf("get_change_status: %+v %v", st, err)
	}
}

// Under user approval the kit's client answers the server's question as
// its ElicitationHandler says: a declined apply writes nothing, an
// approved one applies, and so does an approved undo.
func TestGuard_ElicitationHandlerAnswersForTheUser(t *testing.T) {
	s := &kv{m: map[string]string{"theme": "light"}}
	g := changesettest.NewGuard(t, changeset.Options{Approval: changeset.UserApproval})
	var asked []string
	answer := changesettest.Decline
	g.ElicitationHandler = func(ctx context.Context, req *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
		asked = append(asked, req.Params.Message)
		return answer(ctx, req)
	}
	changeset.Register(g.Guard, &mcp.Tool{Name: "set_setting"}, setOp(s, none))

	p, err := g.Preview("set_setting", setIn{"theme", "dark"})
	if err != nil || p.ConfirmationToken != "" {
		t.Fatalf("preview under user approval: %+v %v", p, err)
	}
	if _, err := g.Apply(p); err == nil || !strings.Contains(err.Error(), "declined") || s.get("theme") != "light" {
		t.Fatalf("a declined apply: %v, theme %q", err, s.get("theme"))
	}
	answer = changesettest.Approve
	a, err := g.Apply(p)
	if err != nil || s.get("theme") != "dark" {
		t.Fatalf("an approved apply: %v, theme %q", err, s.get("theme"))
	}
	if _, err := g.Undo(a); err != nil || s.get("theme") != "light" {
		t.Fatalf("an approved undo: %v, theme %q", err, s.get("theme"))
	}
	if len(asked) != 3 || !strings.Contains(asked[0], `"light" → "dark"`) {
		t.Errorf("the user was asked %q", asked)
	}
}

func TestCheckRun_PassesACorrectOperation(t *testing.T) {
	s := &kv{m: map[string]string{"theme": "light", "language": "en"}}
	g := changesettest.NewGuard(t, changeset.Options{})
	changeset.Register(g.Guard, &mcp.Tool{Name: "set_setting"}, setOp(s, none))
	r := &recorder{TB: t}
	changesettest.CheckRun(r, g,
		changesettest.Call{Op: "set_setting", Args: setIn{"theme", "dark"}},
		changesettest.Call{Op: "set_setting", Args: setIn{"language", "fr"}},
		changesettest.Call{Op: "set_setting", Args: setIn{"theme", "blue"}},
	)
	if len(r.errors) > 0 {
		t.Fatalf("CheckRun failed a correct operation:\n%s", strings.Join(r.errors, "\n"))
	}
	if s.get("theme") != "light" || s.get("language") != "en" {
		t.Errorf("after CheckRun: %v", s.m)
	}
}

func TestCheckRun_FailsABrokenInverse(t *testing.T) {
	s := &kv{m: map[string]string{"theme": "light"}}
	g := changesettest.NewGuard(t, changeset.Options{})
	changeset.Register(g.Guard, &mcp.Tool{Name: "set_setting"}, setOp(s, brokenUndo))
	r := &recorder{TB: t}
	changesettest.CheckRun(r, g,
		changesettest.Call{Op: "set_setting", Args: setIn{"theme", "dark"}},
		changesettest.Call{Op: "set_setting", Args: setIn{"theme", "blue"}},
	)
	wantFailure(t, r.errors, "CheckRun: ")
	if !strings.Contains(strings.Join(r.errors, "\n"), "did not") {
		t.Errorf("the report does not say what the undo did not do: %q", r.errors)
	}
}

func TestCheckRun_FailsAnInvalidCall(t *testing.T) {
	s := &kv{m: map[string]string{"theme": "light"}}
	g := changesettest.NewGuard(t, changeset.Options{})
	changeset.Register(g.Guard, &mcp.Tool{Name: "set_setting"}, setOp(s, none))
	r := &recorder{TB: t}
	changesettest.CheckRun(r, g, changesettest.Call{Op: "set_setting", Args: "not an object"})
	wantFailure(t, r.errors, "must encode to a JSON object")
}

func TestCheckRun_FailsAnUndoThatDoesNotRestore(t *testing.T) {
	s := &kv{m: map[string]string{"theme": "light"}}
	g := changesettest.NewGuard(t, changeset.Options{})
	op := setOp(s, brokenUndo)
	preview := op.Preview
	op.Preview = func(ctx context.Context, in setIn) (*changeset.Proposal[setIn], error) {
		p, err := preview(ctx, in)
		if p != nil {
			p.Resource = "setting:" + in.Key
		}
		return p, err
	}
	changeset.Register(g.Guard, &mcp.Tool{Name: "set_setting"}, op)
	r := &recorder{TB: t}
	changesettest.CheckRun(r, g, changesettest.Call{Op: "set_setting", Args: setIn{"theme", "dark"}})
	wantFailure(t, r.errors, `the run's undo did not restore setting:theme: before the run Observe returned "light", after the undo "light!"`)
}
