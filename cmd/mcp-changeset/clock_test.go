package main

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"
)

// TestExpire_ReadsTheCommandsClock: the ledger a command opens reads
// Main.Now, so what expire finds expired agrees with the ages it shows.
func TestExpire_ReadsTheCommandsClock(t *testing.T) {
	t.Parallel()
	f := populate(t)
	// Three hours ago "stale" (previewed two hours ago) did not exist yet;
	// "old_pending" had expired forty days before.
	then := time.Now().Add(-3 * time.Hour)
	var stdout, stderr bytes.Buffer
	m := &Main{Stdout: &stdout, Stderr: &stderr, Getenv: func(string) string { return "" }, Now: func() time.Time { return then }}
	if code := m.Run(context.Background(), []string{"expire", "--ledger", f.path}); code != exitDryRun {
		t.Fatalf("expire exited %d: %s%s", code, stdout.String(), stderr.String())
	}
	out := stdout.String()
	if !strings.Contains(out, "would expire 1 pending change") || !strings.Contains(out, f.ids["old_pending"]) || strings.Contains(out, f.ids["stale"]) {
		t.Fatalf("expire by a clock three hours back:\n%s", out)
	}
	// By the real clock both have expired.
	want(t, runL(t, f.path, "expire"), exitDryRun, "would expire 2 pending changes", f.ids["stale"], f.ids["old_pending"])
}
