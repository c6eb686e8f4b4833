package serve

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	changeset "github.com/mcp-changeset/changeset-go"
	"github.com/mcp-changeset/changeset-go/internal/testkit"
	"github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// mainArgsEnv carries the command line of the "main" child, as JSON.
const mainArgsEnv = "SERVE_TEST_MAIN_ARGS"

const carolToken = "carol-0123456789abcdef"

// whoami is what the child's one tool answers: how the Guard's options
// that Main set name the caller.
type whoami struct {
	Scope     string `json:"scope"`
	Principal string `json:"principal"`
}

// runMain is the child's main function: a Program with its own Verifier,
// which knows one token, carol's.
func runMain() {
	var args []string
	if err := json.Unmarshal([]byte(os.Getenv(mainArgsEnv)), &args); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(3)
	}
	os.Args = append([]string{"svc"}, args...)
	Main(Program{
		Name:  "svc",
		About: "A test server. Tools: whoami.",
		Verifier: func(_ context.Context, token string, _ *http.Request) (*auth.TokenInfo, error) {
			if token != carolToken {
				return nil, auth.ErrInvalidToken
			}
			return &auth.TokenInfo{UserID: "carol", Expiration: time.Now().Add(time.Hour)}, nil
		},
		Setup: func(server *mcp.Server, guard *changeset.Guard, _ *slog.Logger) error {
			mcp.AddTool(server, &mcp.Tool{Name: "whoami"}, func(ctx context.Context, req *mcp.CallToolRequest, _ struct{}) (*mcp.CallToolResult, whoami, error) {
				scope, err := ScopeFromRequest(ctx, req)
				if err != nil {
					return nil, whoami{}, err
				}
				principal, err := PrincipalFromRequest(ctx, req)
				return nil, whoami{Scope: scope, Principal: principal}, err
			})
			return nil
		},
	})
	os.Exit(0) // Main returned: a clean stop
}

// mainCmd runs the child with args and a fresh ledger.
func mainCmd(t *testing.T, args ...string) (*exec.Cmd, *testkit.Buffer, *testkit.Buffer) {
	t.Helper()
	args = append([]string{"--ledger", filepath.Join(t.TempDir(), "ledger.db")}, args...)
	js, _ := json.Marshal(args)
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), childEnv+"=main", mainArgsEnv+"="+string(js), "MCP_CHANGESET_LEDGER=")
	stdout, stderr := new(testkit.Buffer), new(testkit.Buffer)
	cmd.Stdout, cmd.Stderr = stdout, stderr
	return cmd, stdout, stderr
}

func TestMain_UsageErrorsExit2AndHelpExits0(t *testing.T) {
	for _, tc := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"--http", "0.0.0.0:0"}, 2, "not a loopback address"},
		{[]string{"--stateless"}, 2, "only make sense with --http"},
		{[]string{"stray"}, 2, `unexpected argument "stray"`},
		{[]string{"--no-such-flag"}, 2, "Common flags:"},
		{[]string{"--help"}, 0, "--stateless"},
		{[]string{"--durability", "fast"}, 2, `unknown durability "fast": use full`},
		{[]string{"--help"}, 0, "--durability durability"},
	} {
		cmd, stdout, stderr := mainCmd(t, tc.args...)
		_ = cmd.Run()
		out := stdout.String() + stderr.String()
		if cmd.ProcessState.ExitCode() != tc.code || !strings.Contains(out, tc.want) {
			t.Errorf("%v: exit %d, output %q; want exit %d and %q", tc.args, cmd.ProcessState.ExitCode(), out, tc.code, tc.want)
		}
	}
}

// A Program with its own Verifier serves HTTP without a token file; the
// identity the verifier returns is the scope and the principal; SIGTERM
// ends the process cleanly.
func TestMain_VerifierIdentityIsScopeAndPrincipal(t *testing.T) {
	for _, stateless := range []bool{false, true} {
		t.Run(fmt.Sprint("stateless=", stateless), func(t *testing.T) {
			args := []string{"--http", "127.0.0.1:0"}
			if stateless {
				args = append(args, "--stateless")
			}
			cmd, _, stderr := mainCmd(t, args...)
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			exited := make(chan error, 1)
			go func() { exited <- cmd.Wait() }()
			t.Cleanup(func() {
				cmd.Process.Kill()
				if t.Failed() {
					t.Logf("stderr:\n%s", stderr)
				}
			})
			url := waitListening(t, stderr)

			resp, err := http.Post(url, "application/json", strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"tools/list"}`))
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if resp.StatusCode != http.StatusUnauthorized {
				t.Fatalf("without a token: status %d, want 401", resp.StatusCode)
			}

			client := mcp.NewClient(&mcp.Implementation{Name: "test-client", Version: "1"}, nil)
			cs, err := client.Connect(context.Background(), &mcp.StreamableClientTransport{Endpoint: url,
				HTTPClient: &http.Client{Transport: bearerRT(carolToken)}, DisableStandaloneSSE: stateless, MaxRetries: -1}, nil)
			if err != nil {
				t.Fatal(err)
			}
			res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "whoami"})
			if err != nil || res.IsError {
				t.Fatalf("whoami: %v %+v", err, res)
			}
			b, _ := json.Marshal(res.StructuredContent)
			if got := string(b); got != `{"principal":"carol","scope":"user:carol"}` {
				t.Errorf("whoami = %s", got)
			}
			// A second client keeps its session, and in stateful mode its
			// event stream, open across the SIGTERM: the shutdown ends it
			// rather than wait out its five seconds.
			cs.Close()
			open, err := client.Connect(context.Background(), &mcp.StreamableClientTransport{Endpoint: url,
				HTTPClient: &http.Client{Transport: bearerRT(carolToken)}, DisableStandaloneSSE: stateless, MaxRetries: -1}, nil)
			if err != nil {
				t.Fatal(err)
			}
			defer open.Close()

			sent := time.Now()
			cmd.Process.Signal(syscall.SIGTERM)
			select {
			case err := <-exited:
				if took := time.Since(sent); took > 4*time.Second {
					t.Errorf("the server took %v to stop with a session open", took)
				}
				if err != nil {
					t.Fatalf("after SIGTERM: %v, want exit status 0; stderr:\n%s", err, stderr)
				}
			case <-time.After(10 * time.Second):
				t.Fatal("no exit within 10 s of SIGTERM")
			}
			if strings.Contains(stderr.String(), carolToken) {
				t.Fatal("the token reached the log")
			}
		})
	}
}

// waitListening waits for the "listening on URL" line and returns the URL.
func waitListening(t *testing.T, stderr *testkit.Buffer) string {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for time.Now().Before(deadline) {
		for _, line := range strings.Split(stderr.String(), "\n") {
			if url, ok := strings.CutPrefix(line, "listening on "); ok {
				return strings.TrimSpace(url)
			}
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatal(errors.New("the server printed no URL"))
	return ""
}

type bearerRT string

func (b bearerRT) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+string(b))
	return http.DefaultTransport.RoundTrip(r)
}
