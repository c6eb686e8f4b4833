package changeset_test

import (
	"context"
	"fmt"
	"io/fs"
	"log/slog"
	"regexp"
	"strings"
	"sync/atomic"
	"testing"

	changeset "github.com/mcp-changeset/changeset-go"
	"github.com/mcp-changeset/changeset-go/internal/testkit"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// logBuffer is a slog JSON handler's output, safe to read while the Guard
// writes.
type logBuffer struct{ testkit.Buffer }

// records returns the records logged so far with the message msg.
func (b *logBuffer) records(t *testing.T, msg string) []map[string]any {
	t.Helper()
	var out []map[string]any
	for _, r := range b.Records(t) {
		if r["msg"] == msg {
			out = append(out, r)
		}
	}
	return out
}

func withLog(b *logBuffer) func(*changeset.Options) {
	return func(o *changeset.Options) {
		o.Logger = slog.New(slog.NewJSONHandler(b, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
}

var referenceRE = regexp.MustCompile(`\(reference (ref_[0-9a-f]{8}); the server's log has the details\)`)

// A Preview or Observe that fails with an error that is not a refusal
// reaches the agent as the error's type name and a reference, and the log
// has the full error under the same reference.
func TestPreview_FailureIsLoggedUnderTheReferenceTheAgentSees(t *testing.T) {
	const secretPath = "/srv/secret/config.json"
	pathErr := func() error {
		return fmt.Errorf("read the settings file: %w", &fs.PathError{Op: "open", Path: secretPath, Err: fs.ErrPermission})
	}
	var logs logBuffer
	f := newFixture(t, withLog(&logs))
	changeset.Register(f.guard, &mcp.Tool{Name: "broken"}, changeset.Operation[setIn, setIn, setOut]{
		Preview: func(ctx context.Context, in setIn) (*changeset.Proposal[setIn], error) {
			return nil, pathErr()
		},
		Apply: func(ctx context.Context, p setIn) (setOut, error) { return setOut{}, nil },
	})
	changeset.Register(f.guard, &mcp.Tool{Name: "blind"}, changeset.Operation[setIn, setIn, setOut]{
		AllowEmptyDiff: true, // its diff is not what the test is about
		Preview: func(ctx context.Context, in setIn) (*changeset.Proposal[setIn], error) {
			return &changeset.Proposal[setIn]{Payload: in, Summary: "Set " + in.Key}, nil
		},
		Apply:   func(ctx context.Context, p setIn) (setOut, error) { return setOut{}, nil },
		Observe: func(ctx context.Context, p setIn) (any, error) { return nil, pathErr() },
	})

	seen := map[string]bool{}
	for _, op := range []string{"broken", "blind", "broken"} {
		msg := mustFail(t, f.session, "preview_"+op, map[string]any{"key": "theme", "value": "dark"},
			"the preview of "+op+" failed: fs.PathError (reference ref_")
		if strings.Contains(msg, secretPath) || strings.Contains(msg, "settings file") {
			t.Fatalf("the agent was told the error's text: %q", msg)
		}
		m := referenceRE.FindStringSubmatch(msg)
		if m == nil {
			t.Fatalf("no reference in %q", msg)
		}
		ref := m[1]
		if seen[ref] {
			t.Fatalf("reference %s given twice", ref)
		}
		seen[ref] = true

		var found map[string]any
		for _, r := range logs.records(t, "preview failed") {
			if r["reference"] == ref {
				found = r
			}
		}
		if found == nil {
			t.Fatalf("no log record with reference %s; log:\n%s", ref, logs.String())
		}
		if found["level"] != "ERROR" || found["action"] != op || found["error_type"] != "fs.PathError" ||
			found["err"] != "read the settings file: open "+secretPath+": permission denied" {
			t.Fatalf("log record %v, want level ERROR, action %s and the full error", found, op)
		}
	}
	if _, err := f.guard.Preview(context.Background(), "broken", setIn{Key: "theme"}); err == nil || !referenceRE.MatchString(err.Error()) {
		t.Fatalf("Preview for trusted code: %v, want the reference too", err)
	}
}

// A refusal of the Preview (Refuse) reaches the agent unchanged, with no
// reference and no error record.
func TestPreview_RefusalCarriesNoReference(t *testing.T) {
	var logs logBuffer
	f := newFixture(t, withLog(&logs))
	msg := mustFail(t, f.session, "preview_set", map[string]any{"key": "", "value": "x"}, "key is required")
	if strings.Contains(msg, "reference") || len(logs.records(t, "preview failed")) != 0 {
		t.Fatalf("a refusal was treated as a failure: %q; log:\n%s", msg, logs.String())
	}
}

// The log record of every transition names the run, the principal of the
// request and, for a failed change, the kind of failure with the full
// error.
func TestLog_TransitionsNameRunPrincipalAndFailure(t *testing.T) {
	var logs logBuffer
	f := newFixture(t, withLog(&logs), func(o *changeset.Options) {
		o.Principal = func(ctx context.Context, req *mcp.CallToolRequest) (string, error) { return "alice", nil }
	})
	run, err := f.guard.StartRun(context.Background(), "task")
	if err != nil {
		t.Fatal(err)
	}
	out := mustCall(t, f.session, "preview_set", map[string]any{"key": "theme", "value": "dark", "run_id": run.RunID})
	id := out["change_id"].(string)
	f.apply(id, out["confirmation_token"].(string))

	out = mustCall(t, f.session, "preview_fail", map[string]any{"key": "theme", "value": "x", "run_id": run.RunID})
	failID := out["change_id"].(string)
	mustFail(t, f.session, "apply_change", map[string]any{"change_id": failID, "confirmation_token": out["confirmation_token"]}, "fs.PathError")

	type key struct{ id, from, to string }
	got := map[key]map[string]any{}
	for _, r := range logs.records(t, "change transition") {
		got[key{r["change_id"].(string), r["from"].(string), r["to"].(string)}] = r
	}
	for _, k := range []key{{id, "", "pending"}, {id, "pending", "applying"}, {id, "applying", "applied"}, {failID, "applying", "apply_failed"}} {
		r := got[k]
		if r == nil {
			t.Fatalf("no transition record %v; log:\n%s", k, logs.String())
		}
		if r["run_id"] != run.RunID || r["principal"] != "alice" || r["by"] != "agent:alice" {
			t.Errorf("record %v: run_id %v principal %v by %v, want %s, alice, agent:alice", k, r["run_id"], r["principal"], r["by"], run.RunID)
		}
	}
	failed := got[key{failID, "applying", "apply_failed"}]
	if failed["level"] != "WARN" || failed["failure"] != "error" || failed["error_type"] != "fs.PathError" ||
		!strings.Contains(failed["error"].(string), "/srv/secret/credentials") {
		t.Errorf("failed transition %v, want WARN with failure, type and full error", failed)
	}
	if ok := got[key{id, "applying", "applied"}]; ok["failure"] != nil || ok["level"] != "INFO" {
		t.Errorf("applied transition %v carries a failure", ok)
	}
	for _, tok := range []string{"confirm_", "undo_"} {
		if strings.Contains(logs.String(), tok) {
			t.Fatalf("the log holds a token (%s…):\n%s", tok, logs.String())
		}
	}
}

// A run undo that cannot read a change's current state skips the change
// with the error's type name and a reference; the log has the full error
// under that reference.
func TestUndoRun_UnreadableStateIsLoggedUnderTheReference(t *testing.T) {
	const secretPath = "/srv/secret/state.json"
	var logs logBuffer
	f := newFixture(t, withLog(&logs))
	var broken atomic.Bool
	changeset.Register(f.guard, &mcp.Tool{Name: "flaky"}, changeset.Operation[setIn, setIn, setOut]{
		AllowEmptyDiff: true, // its diff is not what the test is about
		Preview: func(ctx context.Context, in setIn) (*changeset.Proposal[setIn], error) {
			return &changeset.Proposal[setIn]{Payload: in, Summary: "Set " + in.Key, Resource: "flaky:" + in.Key}, nil
		},
		Apply: func(ctx context.Context, p setIn) (setOut, error) {
			return setOut{Previous: f.store.set(p.Key, p.Value)}, nil
		},
		Undo: func(ctx context.Context, p setIn, r setOut) error { f.store.set(p.Key, r.Previous); return nil },
		Observe: func(ctx context.Context, p setIn) (any, error) {
			if broken.Load() {
				return nil, fmt.Errorf("read state: %w", &fs.PathError{Op: "open", Path: secretPath, Err: fs.ErrNotExist})
			}
			return f.store.get(p.Key), nil
		},
	})
	ctx := context.Background()
	run, err := f.guard.StartRun(ctx, "task")
	if err != nil {
		t.Fatal(err)
	}
	p, err := f.guard.Preview(ctx, "flaky", map[string]any{"key": "theme", "value": "dark", "run_id": run.RunID})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.guard.Apply(ctx, p.ChangeID, p.ConfirmationToken); err != nil {
		t.Fatal(err)
	}
	broken.Store(true)
	rep, err := f.guard.UndoRun(ctx, run.RunID, true, changeset.Person("ops"))
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Skipped) != 1 || rep.Skipped[0].ChangeID != p.ChangeID {
		t.Fatalf("skipped %+v, want the change whose state cannot be read", rep.Skipped)
	}
	reason := rep.Skipped[0].Reason
	m := referenceRE.FindStringSubmatch(reason)
	if m == nil || !strings.Contains(reason, "could not be read: fs.PathError (reference ") || strings.Contains(reason, secretPath) {
		t.Fatalf("reason %q, want the type name and a reference, not the path", reason)
	}
	for _, r := range logs.records(t, "observe failed in a run undo") {
		if r["reference"] == m[1] {
			if r["level"] != "ERROR" || r["change_id"] != p.ChangeID || r["run_id"] != run.RunID ||
				!strings.Contains(r["err"].(string), "read state: open "+secretPath) {
				t.Fatalf("log record %v, want the full error of the change", r)
			}
			return
		}
	}
	t.Fatalf("no log record with reference %s; log:\n%s", m[1], logs.String())
}
