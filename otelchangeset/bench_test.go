package otelchangeset_test

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"

	changeset "github.com/mcp-changeset/changeset-go"
	"github.com/mcp-changeset/changeset-go/otelchangeset"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
)

// BenchmarkCycle measures a preview and its apply through the Go API on a
// SQLite ledger, without an Observer and with the OpenTelemetry SDK's
// (spans batched to an exporter that drops them, metrics aggregated for a
// reader), so that the cost of each can be compared:
//
//	go test -run - -bench Cycle -benchmem ./otelchangeset
func BenchmarkCycle(b *testing.B) {
	for _, observed := range []bool{false, true} {
		b.Run(fmt.Sprintf("observer=%v", map[bool]string{false: "nil", true: "otel"}[observed]), func(b *testing.B) {
			opts := changeset.Options{LedgerPath: filepath.Join(b.TempDir(), "ledger.db"), WriteMode: changeset.WriteGuarded}
			if observed {
				tp := sdktrace.NewTracerProvider(sdktrace.WithBatcher(tracetest.NewNoopExporter()))
				mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(sdkmetric.NewManualReader()))
				b.Cleanup(func() { _ = tp.Shutdown(context.Background()); _ = mp.Shutdown(context.Background()) })
				obs, err := otelchangeset.New(tp, mp)
				if err != nil {
					b.Fatal(err)
				}
				opts.Observer = obs
			}
			g, err := changeset.New(nil, opts)
			if err != nil {
				b.Fatal(err)
			}
			b.Cleanup(func() { g.Close() })
			value := ""
			changeset.Register(g, &mcp.Tool{Name: "set"}, changeset.Operation[setIn, setIn, setOut]{
				Preview: func(ctx context.Context, in setIn) (*changeset.Proposal[setIn], error) {
					return &changeset.Proposal[setIn]{Payload: in, Summary: "Set " + in.Key, Resource: "key:" + in.Key}, nil
				},
				Apply: func(ctx context.Context, p setIn) (setOut, error) {
					old := value
					value = p.Value
					return setOut{Previous: old}, nil
				},
				Undo:    func(ctx context.Context, p setIn, r setOut) error { value = r.Previous; return nil },
				Observe: func(ctx context.Context, p setIn) (any, error) { return value, nil },
			})
			ctx := context.Background()
			b.ReportAllocs()
			b.ResetTimer()
			for i := range b.N {
				p, err := g.Preview(ctx, "set", setIn{Key: "k", Value: fmt.Sprint(i)})
				if err != nil {
					b.Fatal(err)
				}
				if _, err := g.Apply(ctx, p.ChangeID, p.ConfirmationToken); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
