package checkpoint_test

import (
	"crypto/ed25519"
	"crypto/x509"
	"encoding/base64"
	"encoding/pem"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/mcp-changeset/changeset-go/checkpoint"
)

func TestLoadOrCreateKey_CreatesA0600FileOnce(t *testing.T) {
	if runtime.GOOS == "windows" {
		t.Skip("no Unix file modes")
	}
	path := filepath.Join(t.TempDir(), "checkpoint.key")
	key, created, err := checkpoint.LoadOrCreateKey(path)
	if err != nil || !created {
		t.Fatalf("LoadOrCreateKey of a new file = created %v, %v", created, err)
	}
	info, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if perm := info.Mode().Perm(); perm != 0o600 {
		t.Fatalf("the new key file has mode %04o, want 0600", perm)
	}
	again, created, err := checkpoint.LoadOrCreateKey(path)
	if err != nil || created || !again.Equal(key) {
		t.Fatalf("LoadOrCreateKey of the existing file = created %v, same key %v, %v", created, again.Equal(key), err)
	}
	loaded, err := checkpoint.LoadKey(path)
	if err != nil || !loaded.Equal(key) {
		t.Fatalf("LoadKey = same key %v, %v", loaded.Equal(key), err)
	}
	// The documented format: one PEM "PRIVATE KEY" block, PKCS #8.
	data, _ := os.ReadFile(path)
	block, _ := pem.Decode(data)
	if block == nil || block.Type != "PRIVATE KEY" {
		t.Fatalf("the key file holds %q, want a PEM PRIVATE KEY block", data)
	}
	if k, err := x509.ParsePKCS8PrivateKey(block.Bytes); err != nil || !k.(ed25519.PrivateKey).Equal(key) {
		t.Fatalf("the key file's PKCS #8 = %v, %v", k, err)
	}
}

func TestLoadKey_RefusesAFileOthersCanRead(t *testing.T) {
	if runtime.GOOS == "windows" {
		t.Skip("no Unix file modes")
	}
	path := filepath.Join(t.TempDir(), "checkpoint.key")
	if _, _, err := checkpoint.LoadOrCreateKey(path); err != nil {
		t.Fatal(err)
	}
	for _, mode := range []os.FileMode{0o644, 0o640, 0o604, 0o620} {
		if err := os.Chmod(path, mode); err != nil {
			t.Fatal(err)
		}
		_, err := checkpoint.LoadKey(path)
		if err == nil || !strings.Contains(err.Error(), "chmod 600 "+path) {
			t.Errorf("LoadKey of a key file with mode %04o = %v, want a refusal that says chmod 600", mode, err)
		}
		if _, _, err := checkpoint.LoadOrCreateKey(path); err == nil {
			t.Errorf("LoadOrCreateKey of a key file with mode %04o succeeded", mode)
		}
	}
	if err := os.Chmod(path, 0o400); err != nil {
		t.Fatal(err)
	}
	if _, err := checkpoint.LoadKey(path); err != nil {
		t.Errorf("LoadKey of a key file with mode 0400: %v", err)
	}
}

func TestLoadKey_RefusesWhatIsNotAKey(t *testing.T) {
	dir := t.TempDir()
	for name, content := range map[string]string{
		"empty":      "",
		"text":       "not a key\n",
		"public key": pemPublic(t, newKey(t)),
		"two keys":   pemPrivate(t, newKey(t)) + pemPrivate(t, newKey(t)),
	} {
		path := filepath.Join(dir, strings.ReplaceAll(name, " ", "_"))
		if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		if _, err := checkpoint.LoadKey(path); err == nil || !strings.Contains(err.Error(), "PRIVATE KEY") {
			t.Errorf("LoadKey of a file with %s = %v, want a refusal naming the format", name, err)
		}
	}
	if _, err := checkpoint.LoadKey(filepath.Join(dir, "missing")); err == nil {
		t.Error("LoadKey of a missing file succeeded")
	}
	if _, _, err := checkpoint.LoadOrCreateKey(filepath.Join(dir, "no-such-dir", "key")); err == nil {
		t.Error("LoadOrCreateKey in a missing directory succeeded")
	}
}

func TestParsePublicKey_TakesBase64AndPEM(t *testing.T) {
	key := newKey(t)
	pub := key.Public().(ed25519.PublicKey)
	for name, text := range map[string]string{
		"base64":           checkpoint.FormatPublicKey(pub),
		"base64 in a file": checkpoint.FormatPublicKey(pub) + "\n",
		"PEM":              pemPublic(t, key),
	} {
		got, err := checkpoint.ParsePublicKey(text)
		if err != nil || !got.Equal(pub) {
			t.Errorf("ParsePublicKey(%s) = %v, %v", name, got, err)
		}
	}
	for name, text := range map[string]string{
		"too short":   base64.StdEncoding.EncodeToString(pub[:31]),
		"not base64":  "not a key",
		"private key": pemPrivate(t, key),
	} {
		if _, err := checkpoint.ParsePublicKey(text); err == nil {
			t.Errorf("ParsePublicKey(%s) succeeded", name)
		}
	}
}

func pemPrivate(t *testing.T, key ed25519.PrivateKey) string {
	der, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	return string(pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der}))
}

func pemPublic(t *testing.T, key ed25519.PrivateKey) string {
	der, err := x509.MarshalPKIXPublicKey(key.Public())
	if err != nil {
		t.Fatal(err)
	}
	return string(pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: der}))
}
