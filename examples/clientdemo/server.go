package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// The packages the demo builds: the server it drives and the operator's
// CLI whose listing it prints.
const (
	notesPkg = "github.com/mcp-changeset/changeset-go/examples/notes"
	cliPkg   = "github.com/mcp-changeset/changeset-go/cmd/mcp-changeset"
)

// writeModeEnv turns writes on when it is "guarded"; ledgerEnv names a
// default ledger. The demo controls both.
const (
	writeModeEnv = "MCP_CHANGESET_WRITE_MODE"
	ledgerEnv    = "MCP_CHANGESET_LEDGER"
)

// binaries are the programs the demo built.
type binaries struct{ notes, cli string }

// build compiles the notes server and mcp-changeset with one go build, which
// costs about what the server alone does.
func build(ctx context.Context, dir string) (binaries, error) {
	exe := ""
	if runtime.GOOS == "windows" {
		exe = ".exe"
	}
	bin := filepath.Join(dir, "bin")
	cmd := exec.CommandContext(ctx, "go", "build", "-o", bin+string(filepath.Separator), notesPkg, cliPkg)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Run(); err != nil {
		return binaries{}, fmt.Errorf("go build of the notes server and mcp-changeset failed (%v); run the demo from a checkout of the module:\n%s", err, stderr.String())
	}
	return binaries{notes: filepath.Join(bin, "notes"+exe), cli: filepath.Join(bin, "mcp-changeset"+exe)}, nil
}

// server is one notes server process and what it wrote to stderr.
type server struct {
	stderr lockedBuffer
}

// lockedBuffer is a bytes.Buffer safe for the copying goroutine of
// os/exec and the demo reading it.
type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// start starts the notes server over stdio on the demo's notes and ledger
// and connects the client. writes turns writes on; dashboard serves the
// dashboard on a free loopback port.
func (d *demo) start(ctx context.Context, writes, dashboard bool) error {
	args := []string{"--root", d.root, "--ledger", d.ledger}
	if dashboard {
		args = append(args, "--dashboard", "127.0.0.1:0")
	}
	cmd := exec.Command(d.bins.notes, args...)
	cmd.Env = environ(writes)
	srv := &server{}
	cmd.Stderr = &srv.stderr
	d.srv = srv
	client := mcp.NewClient(&mcp.Implementation{Name: "clientdemo", Version: "1.0.0"}, nil)
	cctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	cs, err := client.Connect(cctx, &mcp.CommandTransport{Command: cmd}, nil)
	if err != nil {
		return fmt.Errorf("connect to the notes server: %w", err)
	}
	d.cs = cs
	return nil
}

// environ is the demo's environment without the two variables the demo
// controls, plus MCP_CHANGESET_WRITE_MODE=guarded when writes is set.
func environ(writes bool) []string {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, writeModeEnv+"=") && !strings.HasPrefix(kv, ledgerEnv+"=") {
			env = append(env, kv)
		}
	}
	if writes {
		env = append(env, writeModeEnv+"=guarded")
	}
	return env
}

// stop closes the session, which ends the server (its stdin closes).
func (d *demo) stop() {
	if d.cs != nil {
		d.cs.Close()
		d.cs = nil
	}
}

// serverLog returns what the current notes server wrote to stderr.
func (d *demo) serverLog() string {
	if d.srv == nil {
		return ""
	}
	return d.srv.stderr.String()
}

// dashboardURL waits for the line "notes: dashboard: URL" that the server
// prints to stderr when it starts with --dashboard, and returns the URL.
func (d *demo) dashboardURL(ctx context.Context) (string, error) {
	const prefix = "notes: dashboard: "
	deadline := time.Now().Add(10 * time.Second)
	for {
		for _, line := range strings.Split(d.serverLog(), "\n") {
			if u, ok := strings.CutPrefix(line, prefix); ok {
				return strings.TrimSpace(u), nil
			}
		}
		if time.Now().After(deadline) {
			return "", errors.New("the notes server started with --dashboard but printed no dashboard URL on its standard error")
		}
		select {
		case <-ctx.Done():
			return "", ctx.Err()
		case <-time.After(20 * time.Millisecond):
		}
	}
}

func indent(s, prefix string) string {
	s = strings.TrimRight(s, "\n")
	return prefix + strings.ReplaceAll(s, "\n", "\n"+prefix) + "\n"
}
