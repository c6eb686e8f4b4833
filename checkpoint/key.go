package checkpoint

import (
	"crypto/ed25519"
	"crypto/rand"
	"crypto/x509"
	"encoding/base64"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"runtime"
	"slices"
	"strings"
)

// pemPrivate and pemPublic are the PEM block types of the key files.
const (
	pemPrivate = "PRIVATE KEY"
	pemPublic  = "PUBLIC KEY"
)

// LoadKey reads the Ed25519 private key in the file at path. The file
// holds one PEM block of type "PRIVATE KEY" in PKCS #8, the form of
// `openssl genpkey -algorithm ed25519`; `openssl pkey -in FILE -pubout`
// prints its public half. Like ssh with its keys, LoadKey refuses a file
// whose mode lets its group or others read or write it, and says how to
// fix that: whoever reads the key can sign checkpoints.
func LoadKey(path string) (ed25519.PrivateKey, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("checkpoint: signing key: %w", err)
	}
	defer f.Close()
	info, err := f.Stat()
	if err != nil {
		return nil, fmt.Errorf("checkpoint: signing key: %w", err)
	}
	if err := checkMode(path, info); err != nil {
		return nil, err
	}
	data, err := io.ReadAll(io.LimitReader(f, 64<<10)) // a key file is a few hundred bytes
	if err != nil {
		return nil, fmt.Errorf("checkpoint: signing key: %w", err)
	}
	return parseKey(path, data)
}

// checkMode refuses a key file that is not a regular file, or that its
// group or others may use.
func checkMode(path string, info fs.FileInfo) error {
	if !info.Mode().IsRegular() {
		return fmt.Errorf("checkpoint: signing key %s is not a regular file", path)
	}
	if runtime.GOOS == "windows" {
		return nil // no Unix modes to check
	}
	if perm := info.Mode().Perm(); perm&0o077 != 0 {
		return fmt.Errorf("checkpoint: signing key %s has mode %04o: its group or others may read it, and whoever reads it can sign checkpoints; run chmod 600 %s (and make a new key if others may have read it)",
			path, perm, path)
	}
	return nil
}

// parseKey decodes the key file's content.
func parseKey(path string, data []byte) (ed25519.PrivateKey, error) {
	block, rest := pem.Decode(data)
	if block == nil || block.Type != pemPrivate || len(strings.TrimSpace(string(rest))) != 0 {
		return nil, fmt.Errorf("checkpoint: signing key %s does not hold one PEM %q block (an Ed25519 key in PKCS #8, as openssl genpkey -algorithm ed25519 writes)", path, pemPrivate)
	}
	k, err := x509.ParsePKCS8PrivateKey(block.Bytes)
	if err != nil {
		return nil, fmt.Errorf("checkpoint: signing key %s: %w", path, err)
	}
	key, ok := k.(ed25519.PrivateKey)
	if !ok {
		return nil, fmt.Errorf("checkpoint: signing key %s holds a %T, not an Ed25519 key", path, k)
	}
	return key, nil
}

// LoadOrCreateKey reads the key file at path, as LoadKey does, or creates
// it with a new Ed25519 key, mode 0600, when there is no file there yet:
// created says which. The directory must exist. Two processes creating the
// same key at once both end up with the one that was written first.
func LoadOrCreateKey(path string) (key ed25519.PrivateKey, created bool, err error) {
	key, err = LoadKey(path)
	if !errors.Is(err, fs.ErrNotExist) {
		return key, false, err
	}
	_, key, err = ed25519.GenerateKey(rand.Reader)
	if err != nil {
		return nil, false, fmt.Errorf("checkpoint: make a signing key: %w", err)
	}
	der, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return nil, false, fmt.Errorf("checkpoint: make a signing key: %w", err)
	}
	data := pem.EncodeToMemory(&pem.Block{Type: pemPrivate, Bytes: der})
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if errors.Is(err, fs.ErrExist) {
		key, err = LoadKey(path) // made by someone else just now
		return key, false, err
	}
	if err != nil {
		return nil, false, fmt.Errorf("checkpoint: make a signing key: %w", err)
	}
	_, err = f.Write(data)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		os.Remove(path)
		return nil, false, fmt.Errorf("checkpoint: write the signing key %s: %w", path, err)
	}
	return key, true, nil
}

// FormatPublicKey returns the public key in standard base64, as a
// statement's public_key holds it and --public-key takes it.
func FormatPublicKey(pub ed25519.PublicKey) string { return base64.StdEncoding.EncodeToString(pub) }

// ParsePublicKey decodes an Ed25519 public key written in standard base64
// (as in a statement's public_key), or a PEM "PUBLIC KEY" block (as
// `openssl pkey -pubout` writes).
func ParsePublicKey(text string) (ed25519.PublicKey, error) {
	text = strings.TrimSpace(text)
	if block, rest := pem.Decode([]byte(text)); block != nil {
		if block.Type != pemPublic || len(strings.TrimSpace(string(rest))) != 0 {
			return nil, fmt.Errorf("checkpoint: want one PEM %q block, not %q", pemPublic, block.Type)
		}
		k, err := x509.ParsePKIXPublicKey(block.Bytes)
		if err != nil {
			return nil, fmt.Errorf("checkpoint: public key: %w", err)
		}
		pub, ok := k.(ed25519.PublicKey)
		if !ok {
			return nil, fmt.Errorf("checkpoint: the public key is a %T, not an Ed25519 key", k)
		}
		return pub, nil
	}
	b, err := base64.StdEncoding.DecodeString(text)
	if err != nil || len(b) != ed25519.PublicKeySize {
		return nil, fmt.Errorf("checkpoint: a public key is %d bytes in standard base64 (44 characters, as a statement's public_key) or a PEM %q block", ed25519.PublicKeySize, pemPublic)
	}
	return ed25519.PublicKey(b), nil
}

// joinSorted joins names sorted, with commas and a final "and".
func joinSorted(names []string) string {
	slices.Sort(names)
	if len(names) == 1 {
		return names[0]
	}
	return strings.Join(names[:len(names)-1], ", ") + " and " + names[len(names)-1]
}
