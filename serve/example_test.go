package serve_test

import (
	"context"
	"fmt"
	"log"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"

	changeset "github.com/mcp-changeset/changeset-go"
	"github.com/mcp-changeset/changeset-go/serve"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// A server with a main function of its own: the Guard scopes each change
// to the identity behind the bearer token, and the handler refuses a
// request without a token from the file.
func ExampleHTTPHandler() {
	dir, err := os.MkdirTemp("", "serve-example")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	tokenFile := filepath.Join(dir, "tokens")
	if err := os.WriteFile(tokenFile, []byte("alice-3f0c9a1b7e24d5c8 alice\n"), 0o600); err != nil {
		log.Fatal(err)
	}

	tokens, err := serve.BearerTokensFromFile(tokenFile, nil)
	if err != nil {
		log.Fatal(err)
	}
	server := mcp.NewServer(&mcp.Implementation{Name: "example", Version: "1"}, nil)
	guard, err := changeset.New(server, changeset.Options{
		LedgerPath: filepath.Join(dir, "ledger.db"),
		ScopeFunc:  serve.ScopeFromRequest,     // alice's changes are alice's alone
		Principal:  serve.PrincipalFromRequest, // and the ledger says she made them
	})
	if err != nil {
		log.Fatal(err)
	}
	defer guard.Close()
	// Register the guarded operations here: changeset.Register(guard, …).

	mux := http.NewServeMux()
	mux.Handle(serve.Path, serve.HTTPHandler(server, serve.HTTPOptions{Verifier: tokens.Verify, Stateless: true}))
	srv := httptest.NewServer(mux) // in production: serve.Listen and serve.RunHTTP
	defer srv.Close()

	resp, err := http.Post(srv.URL+serve.Path, "application/json", nil)
	if err != nil {
		log.Fatal(err)
	}
	resp.Body.Close()
	fmt.Println("without a token:", resp.StatusCode)

	client := mcp.NewClient(&mcp.Implementation{Name: "agent", Version: "1"}, nil)
	session, err := client.Connect(context.Background(), &mcp.StreamableClientTransport{
		Endpoint:             srv.URL + serve.Path,
		HTTPClient:           &http.Client{Transport: bearer("alice-3f0c9a1b7e24d5c8")},
		DisableStandaloneSSE: true,
	}, nil)
	if err != nil {
		log.Fatal(err)
	}
	defer session.Close()
	res, err := session.CallTool(context.Background(), &mcp.CallToolParams{Name: "list_runs"})
	if err != nil || res.IsError {
		log.Fatal(err, res)
	}
	fmt.Println("with alice's token: served")
	// Output:
	// without a token: 401
	// with alice's token: served
}

// bearer adds "Authorization: Bearer TOKEN" to every request.
type bearer string

func (b bearer) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+string(b))
	return http.DefaultTransport.RoundTrip(r)
}
