// Package testbin builds the project's commands for tests that run them as
// real subprocesses.
package testbin

import (
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"
)

var (
	mu    sync.Mutex
	built = map[string]string{}
	dir   string
)

// Build compiles the main package at pkg (an import path such as
// "github.com/mcp-changeset/changeset-go/examples/settings") once per test
// process and returns the binary's path. The binary lives in a directory
// removed by Cleanup.
func Build(t testing.TB, pkg string) string {
	t.Helper()
	mu.Lock()
	defer mu.Unlock()
	if bin, ok := built[pkg]; ok {
		return bin
	}
	if dir == "" {
		d, err := os.MkdirTemp("", "changeset-testbin-")
		if err != nil {
			t.Fatal(err)
		}
		dir = d
	}
	bin := filepath.Join(dir, filepath.Base(pkg))
	cmd := exec.Command("go", "build", "-o", bin, pkg)
	cmd.Stderr = os.Stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("go build %s: %v", pkg, err)
	}
	built[pkg] = bin
	return bin
}

// Cleanup removes every binary Build made. Call it from TestMain after the
// tests ran.
func Cleanup() {
	mu.Lock()
	defer mu.Unlock()
	if dir != "" {
		os.RemoveAll(dir)
		dir, built = "", map[string]string{}
	}
}
