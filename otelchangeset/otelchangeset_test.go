package otelchangeset_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	changeset "github.com/mcp-changeset/changeset-go"
	"github.com/mcp-changeset/changeset-go/internal/testkit"
	"github.com/mcp-changeset/changeset-go/otelchangeset"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
)

// settings is what the test operation changes.
type settings struct {
	mu sync.Mutex
	m  map[string]string
}

func (s *settings) get(k string) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.m[k]
}

func (s *settings) set(k, v string) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	old := s.m[k]
	s.m[k] = v
	return old
}

type setIn struct {
	Key   string `json:"key"`
	Value string `json:"value"`
}

type setOut struct {
	Previous string `json:"previous"`
}

// harness is a Guard observed by an Observer on the real OpenTelemetry
// SDK: spans go to an in-memory exporter, metrics to a manual reader.
type harness struct {
	t      *testing.T
	clock  *testkit.Clock
	guard  *changeset.Guard
	store  *settings
	spans  *tracetest.InMemoryExporter
	reader *sdkmetric.ManualReader
	// applySpan is the span the operation's Apply found in its context.
	mu        sync.Mutex
	applySpan trace.SpanContext
}

func newHarness(t *testing.T) *harness {
	t.Helper()
	h := &harness{t: t, clock: testkit.NewClock(time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC)), store: &settings{m: map[string]string{"theme": "light", "font": "serif"}},
		spans: tracetest.NewInMemoryExporter(), reader: sdkmetric.NewManualReader()}
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(h.spans))
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(h.reader))
	t.Cleanup(func() { _ = tp.Shutdown(context.Background()); _ = mp.Shutdown(context.Background()) })
	obs, err := otelchangeset.New(tp, mp)
	if err != nil {
		t.Fatal(err)
	}
	g, err := changeset.New(nil, changeset.Options{
		LedgerPath: filepath.Join(t.TempDir(), "ledger.db"),
		WriteMode:  changeset.WriteGuarded,
		Clock:      h.clock.Now,
		Observer:   obs,
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { g.Close() })
	changeset.Register(g, &mcp.Tool{Name: "set_setting"}, changeset.Operation[setIn, setIn, setOut]{
		Preview: func(ctx context.Context, in setIn) (*changeset.Proposal[setIn], error) {
			return &changeset.Proposal[setIn]{
				Payload:  in,
				Diff:     changeset.DiffFields(map[string]any{in.Key: h.store.get(in.Key)}, map[string]any{in.Key: in.Value}),
				Summary:  "Set " + in.Key,
				Resource: "setting:" + in.Key,
			}, nil
		},
		Apply: func(ctx context.Context, p setIn) (setOut, error) {
			h.mu.Lock()
			h.applySpan = trace.SpanContextFromContext(ctx)
			h.mu.Unlock()
			return setOut{Previous: h.store.set(p.Key, p.Value)}, nil
		},
		Undo: func(ctx context.Context, p setIn, r setOut) error {
			h.store.set(p.Key, r.Previous)
			return nil
		},
		Observe: func(ctx context.Context, p setIn) (any, error) { return h.store.get(p.Key), nil },
	})
	changeset.Register(g, &mcp.Tool{Name: "strict_setting"}, changeset.Operation[setIn, setIn, setOut]{
		AllowEmptyDiff: true, // its diff is not what the test is about
		Preview: func(ctx context.Context, in setIn) (*changeset.Proposal[setIn], error) {
			return &changeset.Proposal[setIn]{Payload: in, Summary: "Set " + in.Key}, nil
		},
		Apply: func(ctx context.Context, p setIn) (setOut, error) {
			return setOut{}, changeset.Refuse("the value %q is not allowed for %s", p.Value, p.Key) // text with the payload
		},
	})
	changeset.Register(g, &mcp.Tool{Name: "busy_setting"}, changeset.Operation[setIn, setIn, setOut]{
		AllowEmptyDiff: true, // its diff is not what the test is about
		Preview: func(ctx context.Context, in setIn) (*changeset.Proposal[setIn], error) {
			return &changeset.Proposal[setIn]{Payload: in, Summary: "Set " + in.Key}, nil
		},
		Apply: func(ctx context.Context, p setIn) (setOut, error) {
			return setOut{}, fmt.Errorf("the settings service: %w", changeset.ErrBusy) // a sentinel of the library, reused
		},
	})
	changeset.Register(g, &mcp.Tool{Name: "unreadable"}, changeset.Operation[setIn, setIn, setOut]{
		Preview: func(ctx context.Context, in setIn) (*changeset.Proposal[setIn], error) {
			return nil, fmt.Errorf("read: %w", &fs.PathError{Op: "open", Path: secretPath, Err: fs.ErrPermission})
		},
		Apply: func(ctx context.Context, p setIn) (setOut, error) { return setOut{}, nil },
	})
	registerRowOp(t, g)
	h.guard = g
	return h
}

// registerRowOp registers set_row, a transactional operation on a table in the
// ledger's database.
func registerRowOp(t *testing.T, g *changeset.Guard) {
	if _, err := g.Ledger().DB().Exec(`CREATE TABLE rows_kv (key TEXT PRIMARY KEY, value TEXT NOT NULL)`); err != nil {
		t.Fatal(err)
	}
	read := func(ctx context.Context, tx *sql.Tx, key string) (string, error) {
		var v string
		err := tx.QueryRowContext(ctx, `SELECT value FROM rows_kv WHERE key = ?`, key).Scan(&v)
		if errors.Is(err, sql.ErrNoRows) {
			return "", nil
		}
		return v, err
	}
	changeset.Register(g, &mcp.Tool{Name: "set_row"}, changeset.Operation[setIn, setIn, setOut]{
		AllowEmptyDiff: true, // its diff is not what the test is about
		Preview: func(ctx context.Context, in setIn) (*changeset.Proposal[setIn], error) {
			return &changeset.Proposal[setIn]{Payload: in, Summary: "Set row " + in.Key, Resource: "row:" + in.Key}, nil
		},
		ApplyTx: func(ctx context.Context, tx *sql.Tx, p setIn) (setOut, error) {
			old, err := read(ctx, tx, p.Key)
			if err == nil {
				_, err = tx.ExecContext(ctx, `INSERT INTO rows_kv (key, value) VALUES (?, ?)
					ON CONFLICT (key) DO UPDATE SET value = excluded.value`, p.Key, p.Value)
			}
			return setOut{Previous: old}, err
		},
		UndoTx: func(ctx context.Context, tx *sql.Tx, p setIn, r setOut) error {
			_, err := tx.ExecContext(ctx, `UPDATE rows_kv SET value = ? WHERE key = ?`, r.Previous, p.Key)
			return err
		},
		ObserveTx: func(ctx context.Context, tx *sql.Tx, p setIn) (any, error) { return read(ctx, tx, p.Key) },
	})
}

// secretValue is a payload value, and secretPath a path in an error, that
// must never reach telemetry.
const (
	secretValue = "midnight-SECRET-7f3a"
	secretPath  = "/srv/secret/settings.json"
)

// previewApply previews op(key, a value holding secretValue) and
// applies it, and returns the change's ID and the tokens it was given.
func (h *harness) previewApply(op, key, runID string) (id string, tokens []string) {
	h.t.Helper()
	in := map[string]any{"key": key, "value": secretValue + "-" + key}
	if runID != "" {
		in["run_id"] = runID
	}
	p, err := h.guard.Preview(context.Background(), op, in)
	if err != nil {
		h.t.Fatalf("Preview: %v", err)
	}
	a, err := h.guard.Apply(context.Background(), p.ChangeID, p.ConfirmationToken)
	if err != nil {
		h.t.Fatalf("Apply: %v", err)
	}
	return p.ChangeID, []string{p.ConfirmationToken, a.UndoToken}
}

// named returns the ended spans with the given name, oldest first.
func (h *harness) named(name string) []tracetest.SpanStub {
	var out []tracetest.SpanStub
	for _, s := range h.spans.GetSpans() {
		if s.Name == name {
			out = append(out, s)
		}
	}
	return out
}

// one returns the only ended span with the given name.
func (h *harness) one(name string) tracetest.SpanStub {
	h.t.Helper()
	s := h.named(name)
	if len(s) != 1 {
		h.t.Fatalf("%d spans %s, want 1; all: %v", len(s), name, spanNames(h.spans.GetSpans()))
	}
	return s[0]
}

func spanNames(spans tracetest.SpanStubs) []string {
	var out []string
	for _, s := range spans {
		out = append(out, s.Name)
	}
	return out
}

// wantAttrs fails unless span has exactly want among the changeset.*
// attributes ("" means absent).
func wantAttrs(t *testing.T, s tracetest.SpanStub, want map[attribute.Key]string) {
	t.Helper()
	got := map[attribute.Key]string{}
	for _, kv := range s.Attributes {
		got[kv.Key] = kv.Value.String()
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("span %s: %s = %q, want %q (all: %v)", s.Name, k, got[k], v, got)
		}
	}
}

// collect reads the metrics.
func (h *harness) collect() metricdata.ResourceMetrics {
	h.t.Helper()
	var rm metricdata.ResourceMetrics
	if err := h.reader.Collect(context.Background(), &rm); err != nil {
		h.t.Fatal(err)
	}
	return rm
}

func find(rm metricdata.ResourceMetrics, name string) (metricdata.Metrics, bool) {
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			if m.Name == name {
				return m, true
			}
		}
	}
	return metricdata.Metrics{}, false
}

// matches reports whether set holds exactly the attributes of want.
func matches(set attribute.Set, want map[string]string) bool {
	if set.Len() != len(want) {
		return false
	}
	for k, v := range want {
		if got, ok := set.Value(attribute.Key(k)); !ok || got.String() != v {
			return false
		}
	}
	return true
}

// sum is the value of the int64 sum name at the data point with exactly
// the attributes want (0 when there is none).
func sum(t *testing.T, rm metricdata.ResourceMetrics, name string, want map[string]string) int64 {
	t.Helper()
	m, ok := find(rm, name)
	if !ok {
		return 0
	}
	s, ok := m.Data.(metricdata.Sum[int64])
	if !ok {
		t.Fatalf("%s is %T, want an int64 sum", name, m.Data)
	}
	for _, dp := range s.DataPoints {
		if matches(dp.Attributes, want) {
			return dp.Value
		}
	}
	return 0
}

// histogram is the data point of changeset.claim.duration with exactly
// the attributes want.
func histogram(t *testing.T, rm metricdata.ResourceMetrics, want map[string]string) metricdata.HistogramDataPoint[float64] {
	t.Helper()
	m, ok := find(rm, "changeset.claim.duration")
	if !ok {
		t.Fatal("no changeset.claim.duration")
	}
	if m.Unit != "s" {
		t.Errorf("changeset.claim.duration unit %q, want s", m.Unit)
	}
	for _, dp := range m.Data.(metricdata.Histogram[float64]).DataPoints {
		if matches(dp.Attributes, want) {
			return dp
		}
	}
	t.Fatalf("no changeset.claim.duration point with %v", want)
	return metricdata.HistogramDataPoint[float64]{}
}

func transition(action, from, to string) map[string]string {
	return map[string]string{"action": action, "from": from, "to": to}
}

var (
	tokenShape  = regexp.MustCompile(`(confirm|undo)_[A-Za-z0-9_-]{32}`)
	digestShape = regexp.MustCompile(`[0-9a-f]{64}`)
)

// assertNoSecrets fails if any span (name, attribute, event, status) or
// metric attribute holds a token, a payload value, or a digest: those of
// the listed changes from the ledger, and anything shaped like one.
func (h *harness) assertNoSecrets(tokens []string, ids ...string) {
	h.t.Helper()
	forbidden := append([]string{secretValue}, tokens...)
	for _, id := range ids {
		c, err := h.guard.Record(context.Background(), id)
		if err != nil {
			h.t.Fatal(err)
		}
		for _, d := range []string{string(c.PayloadHash), string(c.StateHash), string(c.Payload), string(c.Result)} {
			if d != "" {
				forbidden = append(forbidden, d)
			}
		}
	}
	check := func(where, v string) {
		for _, f := range forbidden {
			if f != "" && strings.Contains(v, f) {
				h.t.Errorf("%s holds %q: %q", where, f, v)
			}
		}
		if tokenShape.MatchString(v) || digestShape.MatchString(v) {
			h.t.Errorf("%s holds a token or digest: %q", where, v)
		}
	}
	spans := h.spans.GetSpans()
	if len(spans) == 0 {
		h.t.Fatal("no spans to check")
	}
	for _, s := range spans {
		check("span name", s.Name)
		check(s.Name+" status", s.Status.Description)
		for _, kv := range s.Attributes {
			check(s.Name+" "+string(kv.Key), kv.Value.String())
		}
		for _, e := range s.Events {
			check(s.Name+" event", e.Name)
			for _, kv := range e.Attributes {
				check(s.Name+" event "+string(kv.Key), kv.Value.String())
			}
		}
	}
	rm := h.collect()
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			var sets []attribute.Set
			switch d := m.Data.(type) {
			case metricdata.Sum[int64]:
				for _, dp := range d.DataPoints {
					sets = append(sets, dp.Attributes)
				}
			case metricdata.Histogram[float64]:
				for _, dp := range d.DataPoints {
					sets = append(sets, dp.Attributes)
				}
			}
			for _, set := range sets {
				for _, kv := range set.ToSlice() {
					check(m.Name+" "+string(kv.Key), kv.Value.String())
				}
			}
		}
	}
}

// A preview, its apply and its undo each make a span with the change's
// action, ID and status, the operation runs inside the apply's span, and
// the metrics count every transition, time both claims and follow the
// pending previews; nothing holds a token, payload value or digest.
func TestObserver_FullCycle(t *testing.T) {
	h := newHarness(t)
	ctx := context.Background()
	p, err := h.guard.Preview(ctx, "set_setting", setIn{Key: "theme", Value: secretValue})
	if err != nil {
		t.Fatal(err)
	}
	if got := sum(t, h.collect(), "changeset.pending", map[string]string{"action": "set_setting"}); got != 1 {
		t.Fatalf("changeset.pending after a preview = %d, want 1", got)
	}
	a, err := h.guard.Apply(ctx, p.ChangeID, p.ConfirmationToken)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := h.guard.Undo(ctx, p.ChangeID, a.UndoToken); err != nil {
		t.Fatal(err)
	}

	if got := spanNames(h.spans.GetSpans()); strings.Join(got, " ") != "changeset.preview changeset.apply changeset.undo" {
		t.Fatalf("spans %v, want preview, apply, undo", got)
	}
	for name, status := range map[string]string{"changeset.preview": "pending", "changeset.apply": "applied", "changeset.undo": "undone"} {
		s := h.one(name)
		wantAttrs(t, s, map[attribute.Key]string{otelchangeset.AttrAction: "set_setting", otelchangeset.AttrChangeID: p.ChangeID,
			otelchangeset.AttrStatus: status, otelchangeset.AttrFailure: "", otelchangeset.AttrRunID: ""})
		if s.Status.Code != codes.Unset {
			t.Errorf("span %s status %v, want unset", name, s.Status)
		}
	}
	h.mu.Lock()
	inside := h.applySpan
	h.mu.Unlock()
	if apply := h.one("changeset.apply"); !inside.IsValid() || inside.SpanID() != apply.SpanContext.SpanID() {
		t.Errorf("Apply ran under span %v, want the changeset.apply span %v", inside.SpanID(), apply.SpanContext.SpanID())
	}

	rm := h.collect()
	for _, tr := range [][2]string{{"", "pending"}, {"pending", "applying"}, {"applying", "applied"}, {"applied", "undoing"}, {"undoing", "undone"}} {
		if got := sum(t, rm, "changeset.transitions", transition("set_setting", tr[0], tr[1])); got != 1 {
			t.Errorf("changeset.transitions{%s→%s} = %d, want 1", tr[0], tr[1], got)
		}
	}
	if got := sum(t, rm, "changeset.pending", map[string]string{"action": "set_setting"}); got != 0 {
		t.Errorf("changeset.pending after the apply = %d, want 0", got)
	}
	for _, step := range []string{"apply", "undo"} {
		dp := histogram(t, rm, map[string]string{"action": "set_setting", "step": step})
		if dp.Count != 1 || dp.Sum <= 0 || dp.Sum > 10 {
			t.Errorf("claim duration of %s: count %d sum %v s, want one positive measure in seconds", step, dp.Count, dp.Sum)
		}
	}
	h.assertNoSecrets([]string{p.ConfirmationToken, a.UndoToken}, p.ChangeID)
}

// An apply refused because the resource changed after the preview ends
// its span in error with the failure state_changed and the status
// apply_failed, and counts the move to apply_failed with its failure. A
// wrong token is refused as invalid_token without a status.
func TestObserver_RefusedApply(t *testing.T) {
	h := newHarness(t)
	ctx := context.Background()
	p, err := h.guard.Preview(ctx, "set_setting", setIn{Key: "theme", Value: secretValue})
	if err != nil {
		t.Fatal(err)
	}
	wrong := "confirm_" + strings.Repeat("A", 32)
	if _, err := h.guard.Apply(ctx, p.ChangeID, wrong); !errors.Is(err, changeset.ErrInvalidToken) {
		t.Fatalf("Apply with a wrong token: %v, want ErrInvalidToken", err)
	}
	h.store.set("theme", "edited by a person")
	_, err = h.guard.Apply(ctx, p.ChangeID, p.ConfirmationToken)
	if !errors.Is(err, changeset.ErrStateChanged) {
		t.Fatalf("Apply after an edit: %v, want ErrStateChanged", err)
	}

	applies := h.named("changeset.apply")
	if len(applies) != 2 {
		t.Fatalf("%d apply spans, want 2", len(applies))
	}
	badToken, changed := applies[0], applies[1]
	wantAttrs(t, badToken, map[attribute.Key]string{otelchangeset.AttrChangeID: p.ChangeID, otelchangeset.AttrFailure: "invalid_token",
		otelchangeset.AttrStatus: "", otelchangeset.AttrAction: ""})
	wantAttrs(t, changed, map[attribute.Key]string{otelchangeset.AttrChangeID: p.ChangeID, otelchangeset.AttrAction: "set_setting",
		otelchangeset.AttrFailure: "state_changed", otelchangeset.AttrStatus: "apply_failed"})
	for _, s := range applies {
		if s.Status.Code != codes.Error {
			t.Errorf("span with failure %v has status %v, want Error", s.Attributes, s.Status)
		}
	}
	if changed.Status.Description != "state_changed" {
		t.Errorf("status description %q, want the kind alone", changed.Status.Description)
	}

	rm := h.collect()
	failed := transition("set_setting", "applying", "apply_failed")
	failed["failure"] = "state_changed"
	if got := sum(t, rm, "changeset.transitions", failed); got != 1 {
		t.Errorf("changeset.transitions{applying→apply_failed, state_changed} = %d, want 1", got)
	}
	if got := sum(t, rm, "changeset.transitions", transition("set_setting", "pending", "applying")); got != 1 {
		t.Errorf("changeset.transitions{pending→applying} = %d, want 1 (the wrong token moved nothing)", got)
	}
	dp := histogram(t, rm, map[string]string{"action": "set_setting", "step": "apply", "failure": "state_changed"})
	if dp.Count != 1 {
		t.Errorf("claim duration of the refused apply: count %d, want 1", dp.Count)
	}
	h.assertNoSecrets([]string{p.ConfirmationToken, wrong}, p.ChangeID)
}

// An Apply that fails, even with the payload's value in its message or
// with one of the library's sentinels in its chain, fails its span with
// the change's failure kind as the ledger records it ("error"), and the
// message stays out of the telemetry.
func TestObserver_ApplyErrorTextStaysOut(t *testing.T) {
	for _, op := range []string{"strict_setting", "busy_setting"} {
		t.Run(op, func(t *testing.T) {
			h := newHarness(t)
			ctx := context.Background()
			p, err := h.guard.Preview(ctx, op, setIn{Key: "theme", Value: secretValue})
			if err != nil {
				t.Fatal(err)
			}
			if _, err = h.guard.Apply(ctx, p.ChangeID, p.ConfirmationToken); err == nil {
				t.Fatal("Apply succeeded")
			}
			if op == "strict_setting" && !strings.Contains(err.Error(), secretValue) {
				t.Fatalf("Apply: %v, want the operation's refusal (with the value, for the agent)", err)
			}
			s := h.one("changeset.apply")
			wantAttrs(t, s, map[attribute.Key]string{otelchangeset.AttrFailure: "error", otelchangeset.AttrStatus: "apply_failed", otelchangeset.AttrAction: op})
			if s.Status.Code != codes.Error || s.Status.Description != "error" {
				t.Errorf("span status %v, want Error described as error", s.Status)
			}
			if c, _ := h.guard.Record(ctx, p.ChangeID); string(c.Failure) != "error" {
				t.Errorf("the ledger records failure %q", c.Failure)
			}
			h.assertNoSecrets([]string{p.ConfirmationToken}, p.ChangeID)
		})
	}
}

// A run's undo makes a changeset.undo_run span with the run's ID and final
// status, whose children are the undo spans of its changes; its dry run
// has a span of its own marked dry_run.
func TestObserver_RunUndo(t *testing.T) {
	h := newHarness(t)
	ctx := context.Background()
	run, err := h.guard.StartRun(ctx, "retheme")
	if err != nil {
		t.Fatal(err)
	}
	first, tok1 := h.previewApply("set_setting", "theme", run.RunID)
	second, tok2 := h.previewApply("set_setting", "font", run.RunID)
	row, tok3 := h.previewApply("set_row", "r1", run.RunID)

	if _, err := h.guard.UndoRun(ctx, run.RunID, true, changeset.Person("ops")); err != nil {
		t.Fatal(err)
	}
	rep, err := h.guard.UndoRun(ctx, run.RunID, false, changeset.Person("ops"))
	if err != nil {
		t.Fatal(err)
	}
	if rep.Status != "undone" || h.store.get("theme") != "light" || h.store.get("font") != "serif" {
		t.Fatalf("run undo: %+v, settings %v", rep, h.store.m)
	}

	runs := h.named("changeset.undo_run")
	if len(runs) != 2 {
		t.Fatalf("%d undo_run spans, want 2 (dry run, undo)", len(runs))
	}
	wantAttrs(t, runs[0], map[attribute.Key]string{otelchangeset.AttrRunID: run.RunID, otelchangeset.AttrDryRun: "true", otelchangeset.AttrStatus: "open", otelchangeset.AttrFailure: ""})
	wantAttrs(t, runs[1], map[attribute.Key]string{otelchangeset.AttrRunID: run.RunID, otelchangeset.AttrDryRun: "false", otelchangeset.AttrStatus: "undone", otelchangeset.AttrFailure: ""})

	undos := h.named("changeset.undo")
	if len(undos) != 2 {
		t.Fatalf("%d undo spans, want one per ordinary change (the transactional undo runs in the run's own transaction)", len(undos))
	}
	seen := map[string]bool{}
	for _, u := range undos {
		if u.Parent.SpanID() != runs[1].SpanContext.SpanID() {
			t.Errorf("undo span of %v is not a child of the run's undo", u.Attributes)
		}
		wantAttrs(t, u, map[attribute.Key]string{otelchangeset.AttrRunID: run.RunID, otelchangeset.AttrStatus: "undone"})
		for _, kv := range u.Attributes {
			if kv.Key == otelchangeset.AttrChangeID {
				seen[kv.Value.AsString()] = true
			}
		}
	}
	if !seen[first] || !seen[second] {
		t.Errorf("undo spans name %v, want %s and %s", seen, first, second)
	}
	for _, s := range h.named("changeset.apply") {
		wantAttrs(t, s, map[attribute.Key]string{otelchangeset.AttrRunID: run.RunID})
	}

	rm := h.collect()
	for _, tr := range [][2]string{{"applied", "undoing"}, {"undoing", "undone"}} {
		if got := sum(t, rm, "changeset.transitions", transition("set_setting", tr[0], tr[1])); got != 2 {
			t.Errorf("changeset.transitions{%s→%s} = %d, want 2", tr[0], tr[1], got)
		}
	}
	for _, tr := range [][2]string{{"", "pending"}, {"pending", "applied"}, {"applied", "undone"}} {
		if got := sum(t, rm, "changeset.transitions", transition("set_row", tr[0], tr[1])); got != 1 {
			t.Errorf("changeset.transitions{set_row %s→%s} = %d, want 1", tr[0], tr[1], got)
		}
	}
	if st, _ := h.guard.Status(ctx, row); st.Status != "undone" {
		t.Errorf("the transactional change is %s, want undone", st.Status)
	}
	h.assertNoSecrets(append(append(tok1, tok2...), tok3...), first, second, row)
}

// New with nil providers uses the global ones, which make no spans by
// default: the Guard works as without an Observer.
func TestNew_NilProvidersUseTheGlobalOnes(t *testing.T) {
	obs, err := otelchangeset.New(nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx, end := obs.Start(context.Background(), changeset.Event{Step: changeset.StepPreview, Action: "x"})
	if ctx == nil || end == nil {
		t.Fatal("Start returned nothing")
	}
	end(changeset.Outcome{Action: "x", Failure: "error"})
	obs.Transition(ctx, changeset.Transition{Action: "x", To: "pending"})
}

// A preview that expires is taken off changeset.pending when an apply
// finds it expired, and its move to expired is counted.
func TestObserver_ExpiredPreviewLeavesPending(t *testing.T) {
	h := newHarness(t)
	ctx := context.Background()
	p, err := h.guard.Preview(ctx, "set_setting", setIn{Key: "theme", Value: "dark"})
	if err != nil {
		t.Fatal(err)
	}
	h.clock.Advance(changeset.DefaultTTL + time.Second)
	if _, err := h.guard.Apply(ctx, p.ChangeID, p.ConfirmationToken); !errors.Is(err, changeset.ErrExpired) {
		t.Fatalf("Apply of an expired preview: %v, want ErrExpired", err)
	}
	rm := h.collect()
	if got := sum(t, rm, "changeset.pending", map[string]string{"action": "set_setting"}); got != 0 {
		t.Errorf("changeset.pending = %d, want 0", got)
	}
	if got := sum(t, rm, "changeset.transitions", transition("set_setting", "pending", "expired")); got != 1 {
		t.Errorf("changeset.transitions{pending→expired} = %d, want 1", got)
	}
	wantAttrs(t, h.one("changeset.apply"), map[attribute.Key]string{otelchangeset.AttrFailure: "expired", otelchangeset.AttrStatus: "expired", otelchangeset.AttrAction: "set_setting"})
}

// A preview that fails ends its span in error with the kind alone: the
// span has the action, no change, and nothing of the error's text.
func TestObserver_FailedPreview(t *testing.T) {
	h := newHarness(t)
	if _, err := h.guard.Preview(context.Background(), "unreadable", setIn{Key: "theme", Value: secretValue}); err == nil {
		t.Fatal("Preview succeeded")
	}
	s := h.one("changeset.preview")
	wantAttrs(t, s, map[attribute.Key]string{otelchangeset.AttrAction: "unreadable", otelchangeset.AttrFailure: "error",
		otelchangeset.AttrChangeID: "", otelchangeset.AttrStatus: ""})
	if s.Status.Code != codes.Error || s.Status.Description != "error" {
		t.Errorf("span status %v, want Error described as error", s.Status)
	}
	if got := sum(t, h.collect(), "changeset.pending", map[string]string{"action": "unreadable"}); got != 0 {
		t.Errorf("changeset.pending = %d after a failed preview, want 0", got)
	}
	h.assertNoSecrets([]string{secretPath, "ref_"})
}

// A run that brought a setting back to where it started is closed without
// a write: no undo spans, and each change's move to undone is counted
// with its run.
func TestObserver_RunUndoNoNetChange(t *testing.T) {
	h := newHarness(t)
	ctx := context.Background()
	run, err := h.guard.StartRun(ctx, "try and revert")
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, v := range []string{"dark", "light"} {
		p, err := h.guard.Preview(ctx, "set_setting", map[string]any{"key": "theme", "value": v, "run_id": run.RunID})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := h.guard.Apply(ctx, p.ChangeID, p.ConfirmationToken); err != nil {
			t.Fatal(err)
		}
		ids = append(ids, p.ChangeID)
		h.clock.Advance(time.Second) // the run orders its changes by time
	}
	rep, err := h.guard.UndoRun(ctx, run.RunID, false, changeset.Person("ops"))
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.NoNetChange) != 2 || rep.Status != "undone" {
		t.Fatalf("report %+v, want both changes closed as no net change", rep)
	}
	if n := len(h.named("changeset.undo")); n != 0 {
		t.Errorf("%d undo spans, want none (nothing was written)", n)
	}
	wantAttrs(t, h.one("changeset.undo_run"), map[attribute.Key]string{otelchangeset.AttrRunID: run.RunID, otelchangeset.AttrStatus: "undone"})
	if got := sum(t, h.collect(), "changeset.transitions", transition("set_setting", "applied", "undone")); got != 2 {
		t.Errorf("changeset.transitions{applied→undone} = %d, want 2", got)
	}
	h.assertNoSecrets(nil, ids...)
}
