package testkit

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"
)

// npmStamp, in node_modules, records the digest of the package.json and
// package-lock.json that npm ci last installed.
const npmStamp = ".changeset-go-installed"

// NpmCI runs npm ci in dir unless its node_modules already holds what
// package-lock.json pins, so that a test suite installs a pinned npm
// package once, not on every run.
func NpmCI(t *testing.T, dir string) {
	t.Helper()
	h := sha256.New()
	for _, f := range []string{"package.json", "package-lock.json"} {
		b, err := os.ReadFile(filepath.Join(dir, f))
		if err != nil {
			t.Fatal(err)
		}
		fmt.Fprintf(h, "%s %d\n", f, len(b))
		h.Write(b)
	}
	want := hex.EncodeToString(h.Sum(nil))
	stamp := filepath.Join(dir, "node_modules", npmStamp)
	if got, err := os.ReadFile(stamp); err == nil && string(got) == want {
		return
	}
	start := time.Now()
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "npm", "ci", "--no-audit", "--no-fund")
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "npm_config_update_notifier=false")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("npm ci in %s: %v\n%s", dir, err, out)
	}
	if err := os.WriteFile(stamp, []byte(want), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("npm ci: %v", time.Since(start).Round(time.Millisecond))
}
