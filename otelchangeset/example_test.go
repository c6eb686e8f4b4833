package otelchangeset_test

import (
	"log"

	changeset "github.com/mcp-changeset/changeset-go"
	"github.com/mcp-changeset/changeset-go/otelchangeset"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"go.opentelemetry.io/otel"
)

// Example wires a Guard to the application's OpenTelemetry providers (here
// the global ones, which an application sets up with its exporters).
func Example() {
	obs, err := otelchangeset.New(otel.GetTracerProvider(), otel.GetMeterProvider())
	if err != nil {
		log.Fatal(err)
	}
	server := mcp.NewServer(&mcp.Implementation{Name: "settings", Version: "1.0.0"}, nil)
	guard, err := changeset.New(server, changeset.Options{LedgerPath: "ledger.db", Observer: obs})
	if err != nil {
		log.Fatal(err)
	}
	defer guard.Close()
	// Register operations and serve as usual: every preview, apply, undo
	// and run undo now has a span, and the metrics follow the changes.
}
