package tokenfile

import (
	"bytes"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
)

var testFormat = Format{What: "people file", Field: "NAME", Check: func(name string) error {
	if strings.ContainsRune(name, '!') {
		return errors.New("a name must not hold '!'")
	}
	return nil
}}

func write(t *testing.T, content string, mode os.FileMode) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "people")
	if err := os.WriteFile(path, []byte(content), mode); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(path, mode); err != nil { // past the umask
		t.Fatal(err)
	}
	return path
}

func TestRead_LookupFindsEveryTokenAndNothingElse(t *testing.T) {
	path := write(t, "# people\n\nana-token-0123456789 ana\n  bob-token-0123456789\tbob  \nana-laptop-0123456789 ana\n", 0o600)
	f, err := Read(path, testFormat, nil)
	if err != nil {
		t.Fatal(err)
	}
	if f.Len() != 3 {
		t.Errorf("Len = %d, want 3", f.Len())
	}
	for token, want := range map[string]string{"ana-token-0123456789": "ana", "bob-token-0123456789": "bob", "ana-laptop-0123456789": "ana"} {
		if got, ok := f.Lookup(token); !ok || got != want {
			t.Errorf("Lookup(%q) = %q, %v; want %q", token, got, ok, want)
		}
	}
	for _, bad := range []string{"", "ana", "ana-token-012345678", "ana-token-01234567890", "ANA-TOKEN-0123456789", "# people"} {
		if got, ok := f.Lookup(bad); ok || got != "" {
			t.Errorf("Lookup(%q) = %q, %v; want nothing", bad, got, ok)
		}
	}
}

func TestRead_ErrorsNameFileAndLineNeverTheToken(t *testing.T) {
	for _, tc := range []struct{ content, want string }{
		{"topsecret-0123456789\n", `line 1: want "TOKEN NAME" (two fields)`},
		{"# a comment\ntopsecret-0123456789 ana extra\n", "line 2: want"},
		{"topsecret-0123456789 ana\n\ntopsecret-0123456789 bob\n", "line 3: the same token is on line 1; a token may be on one line only"},
		{"topsecret-0123456789 an!a\n", "line 1: a name must not hold '!'"},
		{"# nobody\n\n", "holds no tokens"},
	} {
		path := write(t, tc.content, 0o600)
		_, err := Read(path, testFormat, nil)
		if err == nil || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), "people file "+path) {
			t.Errorf("%q: %v; want the file's path and %q", tc.content, err, tc.want)
		}
		if err != nil && strings.Contains(err.Error(), "topsecret") {
			t.Errorf("%q: the error shows the token: %v", tc.content, err)
		}
	}
	_, err := Read(filepath.Join(t.TempDir(), "missing"), testFormat, nil)
	if err == nil || !strings.HasPrefix(err.Error(), "people file: open ") || !errors.Is(err, os.ErrNotExist) {
		t.Errorf("a missing file: %v", err)
	}
}

func TestRead_WarnsOfShortTokensAndReadableFilesWithoutTheToken(t *testing.T) {
	var logs bytes.Buffer
	log := slog.New(slog.NewTextHandler(&logs, nil))
	if _, err := Read(write(t, "shorty ana\nlong-enough-token-0123456789 bob\n", 0o640), testFormat, log); err != nil {
		t.Fatal(err)
	}
	out := logs.String()
	if !strings.Contains(out, "short and easy to guess") || !strings.Contains(out, "line=1") || !strings.Contains(out, "name=ana") {
		t.Errorf("no warning for the short token on line 1:\n%s", out)
	}
	if strings.Contains(out, "line=2") {
		t.Errorf("a warning for the long token:\n%s", out)
	}
	if runtime.GOOS != "windows" && !strings.Contains(out, "people file can be read by other users; chmod 600 it") {
		t.Errorf("no warning for a group-readable file:\n%s", out)
	}
	if strings.Contains(out, "shorty") || strings.Contains(out, "long-enough") {
		t.Errorf("a warning shows a token:\n%s", out)
	}

	logs.Reset()
	if _, err := Read(write(t, "long-enough-token-0123456789 bob\n", 0o600), testFormat, log); err != nil {
		t.Fatal(err)
	}
	if logs.Len() != 0 {
		t.Errorf("warnings for a private file of long tokens:\n%s", logs.String())
	}
}

func TestShared_FindsATokenInBothFiles(t *testing.T) {
	a, err := Read(write(t, "# agents\nalice-agent-token-0123456789 alice\nshared-token-0123456789 bob\n", 0o600), testFormat, nil)
	if err != nil {
		t.Fatal(err)
	}
	b, err := Read(write(t, "alice-person-token-0123456789 alice\n\nshared-token-0123456789 bob\n", 0o600), testFormat, nil)
	if err != nil {
		t.Fatal(err)
	}
	if line, other, ok := b.Shared(a); !ok || line != 3 || other != 3 {
		t.Errorf("Shared = %d, %d, %v; want lines 3 and 3", line, other, ok)
	}
	c, err := Read(write(t, "carol-person-token-0123456789 carol\n", 0o600), testFormat, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, _, ok := c.Shared(a); ok {
		t.Error("files without a common token share one")
	}
}
