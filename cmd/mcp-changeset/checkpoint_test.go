package main

import (
	"crypto/ed25519"
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/mcp-changeset/changeset-go/checkpoint"
)

// taken is a checkpoint the command signed into a file.
type taken struct {
	file   string // the statement
	key    string // the key file
	public string // the public key, base64
}

// checkpointOf signs a checkpoint of the ledger at target with a new key.
func checkpointOf(t *testing.T, target string) taken {
	t.Helper()
	return checkpointWith(t, target, filepath.Join(t.TempDir(), "checkpoint.key"))
}

// checkpointWith signs a checkpoint of the ledger at target with the key
// in keyFile, created when missing.
func checkpointWith(t *testing.T, target, keyFile string) taken {
	t.Helper()
	out := filepath.Join(t.TempDir(), "checkpoint.json")
	want(t, runL(t, target, "checkpoint", "--key", keyFile, "--out", out), exitOK)
	key, err := checkpoint.LoadKey(keyFile)
	if err != nil {
		t.Fatal(err)
	}
	return taken{file: out, key: keyFile, public: checkpoint.FormatPublicKey(key.Public().(ed25519.PublicKey))}
}

func TestCheckpoint_PrintsASignedStatementAndMakesTheKey(t *testing.T) {
	t.Parallel()
	onBackends(t, func(t *testing.T, target string) {
		lives(t, target, 1, 2)
		keyFile := filepath.Join(t.TempDir(), "checkpoint.key")
		r := runL(t, target, "checkpoint", "--key", keyFile)
		want(t, r, exitOK, `"seq": 4`)
		info, err := os.Stat(keyFile)
		if err != nil || info.Mode().Perm() != 0o600 {
			t.Fatalf("the key file: %v, %v; want mode 0600", info, err)
		}
		key, err := checkpoint.LoadKey(keyFile)
		if err != nil {
			t.Fatal(err)
		}
		pub := key.Public().(ed25519.PublicKey)
		if !strings.Contains(r.stderr, "created the signing key "+keyFile) || !strings.Contains(r.stderr, checkpoint.FormatPublicKey(pub)) {
			t.Errorf("stderr does not say the key was created and give its public key:\n%s", r.stderr)
		}
		st, err := checkpoint.Parse([]byte(r.stdout))
		if err != nil {
			t.Fatal(err)
		}
		if err := checkpoint.Verify(st, pub); err != nil {
			t.Fatal(err)
		}
		var fields map[string]json.RawMessage
		json.Unmarshal([]byte(r.stdout), &fields)
		if len(fields) != 5 || !regexp.MustCompile(`^"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ"$`).Match(fields["at"]) {
			t.Errorf("the statement %s is not {seq, hash, at, public_key, signature} with at in RFC 3339 UTC", r.stdout)
		}
		// The key is made once.
		r = runL(t, target, "checkpoint", "--key", keyFile)
		want(t, r, exitOK, checkpoint.FormatPublicKey(pub))
		if strings.Contains(r.stderr, "created") {
			t.Errorf("the second run created a key again:\n%s", r.stderr)
		}
	})
}

func TestCheckpoint_RefusesAKeyOthersCanRead(t *testing.T) {
	t.Parallel()
	target := filepath.Join(t.TempDir(), "ledger.db")
	create(t, target)
	lives(t, target, 1, 1)
	cp := checkpointOf(t, target)
	if err := os.Chmod(cp.key, 0o644); err != nil {
		t.Fatal(err)
	}
	r := runL(t, target, "checkpoint", "--key", cp.key)
	wantErr(t, r, "chmod 600 "+cp.key)
	if r.stdout != "" {
		t.Errorf("a refused key signed something:\n%s", r)
	}
}

func TestCheckpoint_MakesNoKeyForAMissingLedger(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	key := filepath.Join(dir, "checkpoint.key")
	wantErr(t, runL(t, filepath.Join(dir, "ledger.db"), "checkpoint", "--key", key), "ledger does not exist")
	if _, err := os.Stat(key); err == nil {
		t.Error("checkpoint made a key for a ledger that does not exist")
	}
}

func TestCheckpoint_RefusesABrokenOrEmptyHistory(t *testing.T) {
	t.Parallel()
	onBackends(t, func(t *testing.T, target string) {
		keyFile := filepath.Join(t.TempDir(), "checkpoint.key")
		wantErr(t, runL(t, target, "checkpoint", "--key", keyFile), "empty")
		lives(t, target, 1, 2)
		tamperWith(t, target, `UPDATE ledger_history SET note = 'all fine' WHERE seq = 2`)
		out := filepath.Join(t.TempDir(), "checkpoint.json")
		r := runL(t, target, "checkpoint", "--key", keyFile, "--out", out)
		want(t, r, exitError, "entry 2 ")
		if !strings.Contains(r.stderr, "not signed: the history") || strings.Contains(r.stdout, "signature") {
			t.Errorf("a broken history was signed, or the refusal says not why:\n%s", r)
		}
		if _, err := os.Stat(out); err == nil {
			t.Error("a broken history's checkpoint was written")
		}
	})
}

func TestVerify_RefusesABadStatement(t *testing.T) {
	t.Parallel()
	target := filepath.Join(t.TempDir(), "ledger.db")
	create(t, target)
	lives(t, target, 1, 2)
	cp := checkpointOf(t, target)
	other := checkpointOf(t, target) // signed with another key
	data, err := os.ReadFile(cp.file)
	if err != nil {
		t.Fatal(err)
	}
	var fields map[string]any
	if err := json.Unmarshal(data, &fields); err != nil {
		t.Fatal(err)
	}
	edited := func(name string, value any) string {
		m := map[string]any{}
		for k, v := range fields {
			m[k] = v
		}
		m[name] = value
		b, _ := json.Marshal(m)
		path := filepath.Join(t.TempDir(), name+".json")
		if err := os.WriteFile(path, b, 0o644); err != nil {
			t.Fatal(err)
		}
		return path
	}
	// Another base64 character in the signature: still base64, another
	// signature.
	sig := []byte(fields["signature"].(string))
	if sig[5] == 'A' {
		sig[5] = 'B'
	} else {
		sig[5] = 'A'
	}
	for _, tc := range []struct {
		name, file string
		args       []string
		want       string
	}{
		{"a changed signature", edited("signature", string(sig)), []string{"--public-key", cp.public}, "the signature does not match"},
		{"a changed seq", edited("seq", 3), []string{"--public-key", cp.public}, "the signature does not match"},
		{"a changed at", edited("at", "2020-01-01T00:00:00Z"), []string{"--public-key", cp.public}, "the signature does not match"},
		{"another key than --public-key", other.file, []string{"--public-key", cp.public}, "signed by another key than the trusted one"},
		{"the trusted key swapped in", edited("public_key", other.public), []string{"--public-key", other.public}, "the signature does not match"},
		{"not a statement", edited("note", "x"), nil, "not a checkpoint statement"},
	} {
		r := runL(t, target, append([]string{"verify", "--checkpoint", tc.file}, tc.args...)...)
		if r.code != exitError || !strings.Contains(r.stdout, "checkpoint "+tc.file+": ") || !strings.Contains(r.stdout, tc.want) {
			t.Errorf("verify with %s: want exit 1 and %q\n%s", tc.name, tc.want, r)
		}
	}
	// --public-key as a file, in base64 or PEM.
	pubFile := filepath.Join(t.TempDir(), "checkpoint.pub")
	os.WriteFile(pubFile, []byte(cp.public+"\n"), 0o644)
	want(t, runL(t, target, "verify", "--checkpoint", cp.file, "--public-key", pubFile), exitOK)
	want(t, runL(t, target, "verify", "--checkpoint", other.file, "--public-key", pubFile), exitError, "another key")
	// Without --public-key a statement is only whole, and the command says so.
	r := runL(t, target, "verify", "--checkpoint", other.file)
	want(t, r, exitOK, "signed ")
	if !strings.Contains(r.stderr, "no --public-key") {
		t.Errorf("verify without --public-key does not warn:\n%s", r.stderr)
	}
}

func TestVerifyAndCheckpoint_UsageErrors(t *testing.T) {
	t.Parallel()
	target := filepath.Join(t.TempDir(), "ledger.db")
	create(t, target)
	for _, args := range [][]string{
		{"verify", "extra"},
		{"verify", "--public-key", "AAAA"},
		{"verify", "--checkpoint", "x.json", "--public-key", filepath.Join(t.TempDir(), "missing.pub")},
		{"verify", "--bogus"},
		{"checkpoint"},
		{"checkpoint", "--key", filepath.Join(t.TempDir(), "k"), "extra"},
	} {
		r := runL(t, target, args...)
		if r.code != exitError || !strings.Contains(r.stderr, "Usage: mcp-changeset "+args[0]) {
			t.Errorf("mcp-changeset %s: want exit %d with the usage\n%s", strings.Join(args, " "), exitError, r)
		}
	}
	want(t, runL(t, target, "verify", "--checkpoint", filepath.Join(t.TempDir(), "missing.json")), exitError, "no such file")
	want(t, run(t, nil, "help", "verify"), exitOK, "--checkpoint FILE")
	want(t, run(t, nil, "checkpoint", "--help"), exitOK, "--key FILE")
}
