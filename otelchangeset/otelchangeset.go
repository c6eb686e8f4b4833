// Package otelchangeset reports what a changeset.Guard does to
// OpenTelemetry: a span for every preview, apply, undo and run undo, and
// metrics of transitions, claim latency and pending previews.
//
//	obs, err := otelchangeset.New(tracerProvider, meterProvider)
//	if err != nil { … }
//	guard, err := changeset.New(server, changeset.Options{…, Observer: obs})
//
// # Spans
//
// changeset.preview, changeset.apply, changeset.undo and
// changeset.undo_run, each a child of the span in the request's context
// (the operation's own spans become its children in turn), with the
// attributes
//
//	changeset.action     the operation, e.g. "set_setting"
//	changeset.change_id  "chg_…"
//	changeset.run_id     "run_…", when the change belongs to a run
//	changeset.status     the change's (or run's) status after the step
//	changeset.failure    the kind of failure or refusal, when the step failed
//	changeset.dry_run    true for an undo run that only reports
//
// A step that failed or was refused has the span status Error, described
// by the kind alone. Nothing else of an error is recorded: error text can
// hold paths and payload values. No span holds payloads, diffs, results,
// tokens or digests.
//
// # Metrics
//
//	changeset.transitions       counter; every committed move of a change,
//	                            by action, from and to (and failure, for a
//	                            failed change). A preview counts as from "".
//	changeset.claim.duration    histogram, seconds; how long an apply or
//	                            undo took from its claim to its recorded
//	                            outcome, by action, step and failure.
//	changeset.pending           up-down counter; previews waiting for an
//	                            apply, by action, as this process saw them.
//
// changeset.pending adds one for each preview this process stores and
// takes one away for each pending change it claims or finds expired. Summed
// over every process that shares a ledger it is the number of pending
// previews, except for those that expire unclaimed (no process sees them
// go until one tries to claim them or an operator runs ExpireStale) and
// those moved by the operator's command line. A single process's value can
// be negative when another process made the previews it claims. For an
// exact count ask the ledger (mcp-changeset list --status pending).
package otelchangeset

import (
	"context"
	"time"

	changeset "github.com/mcp-changeset/changeset-go"
	"github.com/mcp-changeset/changeset-go/ledger"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"
)

// ScopeName is the instrumentation scope of the tracer and meter.
const ScopeName = "github.com/mcp-changeset/changeset-go/otelchangeset"

// Attribute keys of the spans.
const (
	AttrAction   = attribute.Key("changeset.action")
	AttrChangeID = attribute.Key("changeset.change_id")
	AttrRunID    = attribute.Key("changeset.run_id")
	AttrStatus   = attribute.Key("changeset.status")
	AttrFailure  = attribute.Key("changeset.failure")
	AttrDryRun   = attribute.Key("changeset.dry_run")
)

// Observer is a changeset.Observer that reports to OpenTelemetry. It is
// safe for concurrent use.
type Observer struct {
	tracer      trace.Tracer
	transitions metric.Int64Counter
	duration    metric.Float64Histogram
	pending     metric.Int64UpDownCounter
}

var _ changeset.Observer = (*Observer)(nil)

// claimBuckets are the boundaries of changeset.claim.duration, in seconds:
// from a millisecond (a local file) to a minute (a slow remote API).
var claimBuckets = []float64{0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60}

// New returns an Observer that makes spans with tp and metrics with mp;
// nil selects the global provider (otel.GetTracerProvider,
// otel.GetMeterProvider). It fails only if mp refuses an instrument.
func New(tp trace.TracerProvider, mp metric.MeterProvider) (*Observer, error) {
	if tp == nil {
		tp = otel.GetTracerProvider()
	}
	if mp == nil {
		mp = otel.GetMeterProvider()
	}
	meter := mp.Meter(ScopeName)
	o := &Observer{tracer: tp.Tracer(ScopeName)}
	var err error
	if o.transitions, err = meter.Int64Counter("changeset.transitions", metric.WithUnit("{transition}"),
		metric.WithDescription("Moves of changes from one status to another, by action, from and to.")); err != nil {
		return nil, err
	}
	if o.duration, err = meter.Float64Histogram("changeset.claim.duration", metric.WithUnit("s"),
		metric.WithDescription("How long an apply or undo took, from its claim to its recorded outcome."),
		metric.WithExplicitBucketBoundaries(claimBuckets...)); err != nil {
		return nil, err
	}
	if o.pending, err = meter.Int64UpDownCounter("changeset.pending", metric.WithUnit("{change}"),
		metric.WithDescription("Previews waiting for an apply, as this process saw them made and claimed.")); err != nil {
		return nil, err
	}
	return o, nil
}

// Start begins the span of a step.
func (o *Observer) Start(ctx context.Context, e changeset.Event) (context.Context, func(changeset.Outcome)) {
	attrs := make([]attribute.KeyValue, 0, 4)
	attrs = appendNonEmpty(attrs, AttrAction, e.Action)
	attrs = appendNonEmpty(attrs, AttrChangeID, e.ChangeID)
	attrs = appendNonEmpty(attrs, AttrRunID, e.RunID)
	if e.Step == changeset.StepUndoRun {
		attrs = append(attrs, AttrDryRun.Bool(e.DryRun))
	}
	ctx, span := o.tracer.Start(ctx, "changeset."+string(e.Step), trace.WithAttributes(attrs...))
	began := time.Now()
	return ctx, func(out changeset.Outcome) {
		o.end(ctx, span, e, out, time.Since(began))
	}
}

// end finishes the span of a step and records its duration.
func (o *Observer) end(ctx context.Context, span trace.Span, e changeset.Event, out changeset.Outcome, took time.Duration) {
	attrs := make([]attribute.KeyValue, 0, 5)
	if e.Action == "" {
		attrs = appendNonEmpty(attrs, AttrAction, out.Action)
	}
	if e.ChangeID == "" {
		attrs = appendNonEmpty(attrs, AttrChangeID, out.ChangeID)
	}
	if e.RunID == "" {
		attrs = appendNonEmpty(attrs, AttrRunID, out.RunID)
	}
	attrs = appendNonEmpty(attrs, AttrStatus, out.Status)
	attrs = appendNonEmpty(attrs, AttrFailure, out.Failure)
	span.SetAttributes(attrs...)
	if out.Failure != "" {
		span.SetStatus(codes.Error, out.Failure) // the kind only: error text may hold payload values
	}
	span.End()

	if e.Step == changeset.StepApply || e.Step == changeset.StepUndo {
		m := []attribute.KeyValue{attribute.String("action", out.Action), attribute.String("step", string(e.Step))}
		if out.Failure != "" {
			m = append(m, attribute.String("failure", out.Failure))
		}
		o.duration.Record(ctx, took.Seconds(), metric.WithAttributes(m...))
	}
}

// Transition counts a change's move, and keeps changeset.pending.
func (o *Observer) Transition(ctx context.Context, t changeset.Transition) {
	action := attribute.String("action", t.Action)
	attrs := []attribute.KeyValue{action, attribute.String("from", string(t.From)), attribute.String("to", string(t.To))}
	if t.Failure != "" {
		attrs = append(attrs, attribute.String("failure", string(t.Failure)))
	}
	o.transitions.Add(ctx, 1, metric.WithAttributes(attrs...))
	switch {
	case t.From == "" && t.To == ledger.Pending:
		o.pending.Add(ctx, 1, metric.WithAttributes(action))
	case t.From == ledger.Pending:
		o.pending.Add(ctx, -1, metric.WithAttributes(action))
	}
}

func appendNonEmpty(attrs []attribute.KeyValue, k attribute.Key, v string) []attribute.KeyValue {
	if v == "" {
		return attrs
	}
	return append(attrs, k.String(v))
}
