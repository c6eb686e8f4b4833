package main

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/mcp-changeset/changeset-go/internal/pgtest"
)

// The tests run the built command as a subprocess, as an operator would,
// against ledgers populated through the library itself. TestMain builds the
// binary once; with MCP_CHANGESET_TEST_HELPER set, the test binary instead
// acts as a helper process (see helperMain).

// binary is the path of the built mcp-changeset.
var binary string

func TestMain(m *testing.M) {
	if mode := os.Getenv(helperEnv); mode != "" {
		os.Exit(helperMain(mode))
	}
	dir, err := os.MkdirTemp("", "mcp-changeset-test-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	binary = filepath.Join(dir, "mcp-changeset")
	build := exec.Command("go", "build", "-o", binary, ".")
	build.Stdout, build.Stderr = os.Stderr, os.Stderr
	if err := build.Run(); err != nil {
		fmt.Fprintln(os.Stderr, "go build:", err)
		os.RemoveAll(dir)
		os.Exit(1)
	}
	code := m.Run()
	pgtest.Stop()
	os.RemoveAll(dir)
	os.Exit(code)
}

// result is what one run of the command did.
type result struct {
	code           int
	stdout, stderr string
}

func (r result) String() string {
	return fmt.Sprintf("exit %d\n--- stdout:\n%s--- stderr:\n%s", r.code, r.stdout, r.stderr)
}

// secrets are every token and stored digest the tests have minted or read,
// by a description. run fails the test if any output holds one.
var secrets = struct {
	sync.Mutex
	m map[string]string
}{m: map[string]string{}}

// addSecret registers a value that no output of the command may contain.
func addSecret(what, value string) {
	if value == "" {
		return
	}
	secrets.Lock()
	defer secrets.Unlock()
	secrets.m[value] = what
}

// checkNoSecret fails t if out contains a registered secret.
func checkNoSecret(t *testing.T, args []string, out string) {
	t.Helper()
	secrets.Lock()
	defer secrets.Unlock()
	for value, what := range secrets.m {
		if strings.Contains(out, value) {
			t.Errorf("mcp-changeset %s printed %s", strings.Join(args, " "), what)
		}
	}
}

// run runs the command with args and the extra environment variables env
// ("NAME=value"); MCP_CHANGESET_LEDGER is unset unless env sets it. It
// checks that neither output holds a secret.
func run(t *testing.T, env []string, args ...string) result {
	t.Helper()
	cmd := exec.Command(binary, args...)
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, LedgerEnv+"=") {
			cmd.Env = append(cmd.Env, kv)
		}
	}
	cmd.Env = append(cmd.Env, env...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	res := result{stdout: stdout.String(), stderr: stderr.String()}
	if ee, ok := err.(*exec.ExitError); ok {
		res.code = ee.ExitCode()
	} else if err != nil {
		t.Fatalf("run %v: %v", args, err)
	}
	checkNoSecret(t, args, res.stdout+res.stderr)
	return res
}

// runL runs the command on the ledger at path, given with --ledger after
// the subcommand.
func runL(t *testing.T, path string, args ...string) result {
	t.Helper()
	return run(t, nil, append(args, "--ledger", path)...)
}

// want fails the test unless r exited with code and its stdout contains
// every string in stdout.
func want(t *testing.T, r result, code int, stdout ...string) {
	t.Helper()
	if r.code != code {
		t.Fatalf("want exit %d, got %s", code, r)
	}
	for _, s := range stdout {
		if !strings.Contains(r.stdout, s) {
			t.Fatalf("stdout lacks %q:\n%s", s, r)
		}
	}
}

// wantErr fails the test unless r exited with status 1 and its stderr
// contains every string in msgs.
func wantErr(t *testing.T, r result, msgs ...string) {
	t.Helper()
	if r.code != exitError {
		t.Fatalf("want exit 1, got %s", r)
	}
	for _, s := range msgs {
		if !strings.Contains(r.stderr, s) {
			t.Fatalf("stderr lacks %q:\n%s", s, r)
		}
	}
}

// readFile returns the bytes of the file at path.
func readFile(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// sameBytes fails the test if the file at path no longer holds before.
func sameBytes(t *testing.T, path string, before []byte, after string) {
	t.Helper()
	if !bytes.Equal(readFile(t, path), before) {
		t.Fatalf("the main file %s changed after %s", path, after)
	}
}

// writeFile replaces the contents of the file at path.
func writeFile(path string, data []byte) error { return os.WriteFile(path, data, 0o600) }
