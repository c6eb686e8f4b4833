package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func newStore(t *testing.T) (*store, string) {
	t.Helper()
	dir := t.TempDir()
	root, err := os.OpenRoot(dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { root.Close() })
	return &store{root: root}, dir
}

// The Guard's state check runs before Apply; this checks Apply's own line
// of defence for a link that appears after that check.
func TestCompareAndSwap_RefusesALinkEvenWhenTheHashWouldMatch(t *testing.T) {
	s, dir := newStore(t)
	target := filepath.Join(dir, "target.txt")
	writeFile(t, target, "same")
	if err := os.Symlink("target.txt", filepath.Join(dir, "a.txt")); err != nil {
		t.Fatal(err)
	}
	called := false
	_, _, err := s.compareAndSwap("a.txt", digest([]byte("same")), func(bool) error {
		called = true
		return nil
	})
	if err == nil || !strings.Contains(err.Error(), "symbolic link") || called {
		t.Fatalf("err = %v, write called = %v", err, called)
	}
}

func TestWriteFile_IsAtomicAndKeepsTheMode(t *testing.T) {
	s, dir := newStore(t)
	path := filepath.Join(dir, "a.txt")
	writeFile(t, path, "old")
	if err := os.Chmod(path, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := s.writeFile("a.txt", []byte("new")); err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(path)
	if err != nil || fi.Mode().Perm() != 0o600 || readFile(t, path) != "new" {
		t.Fatalf("after write: %v %v %q", fi.Mode(), err, readFile(t, path))
	}
	if names := dirNames(t, dir); len(names) != 1 {
		t.Fatalf("temporary files left: %v", names)
	}
}

func TestCheckName(t *testing.T) {
	for _, ok := range []string{"todo.txt", "Plan 2026.md", "ノート", "a.b.c", strings.Repeat("n", maxNameBytes)} {
		if err := checkName(ok); err != nil {
			t.Errorf("checkName(%q) = %v", ok, err)
		}
	}
	for _, bad := range []string{"", ".", "..", "../x", "a/b", `a\b`, "/abs", ".hidden", "a..b", "a\tb", "a\u200bb", "\xff", strings.Repeat("n", maxNameBytes+1)} {
		if err := checkName(bad); err == nil {
			t.Errorf("checkName(%q) accepted", bad)
		}
	}
}
