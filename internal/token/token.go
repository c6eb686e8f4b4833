// Package token makes the opaque strings a changeset Guard hands out and
// checks them when they come back: tokens, which unlock one step of one
// change or run and which the ledger keeps only as digests, and IDs,
// which name changes and runs. Both are drawn from crypto/rand.
//
// A token is its purpose's prefix followed by [Bytes] random bytes in
// unpadded URL-safe base64 (32 characters, 192 bits). An ID is its kind's
// prefix followed by 10 random bytes in lowercase hex. A string of
// another shape is refused by [Valid] or [ValidID] before the ledger is
// asked, like a wrong one.
package token

import (
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"encoding/hex"
	"strings"

	"github.com/mcp-changeset/changeset-go/ledger"
)

// Prefixes and sizes of tokens and IDs.
const (
	ConfirmPrefix = "confirm_" // a confirmation token: apply a change, or undo a run
	UndoPrefix    = "undo_"    // an undo token: undo a change

	// Bytes is the number of random bytes in a token.
	Bytes = 24
	chars = 32 // base64.RawURLEncoding.EncodedLen(Bytes)

	ChangeIDPrefix = "chg_"
	RunIDPrefix    = "run_"
	idBytes        = 10
)

// Token purposes. A digest binds the purpose, so an undo token can never
// pass as a confirmation token and the reverse.
const (
	PurposeApply   = "apply"
	PurposeUndo    = "undo"
	PurposeRunUndo = "run-undo"
)

// New returns a fresh token with the given prefix.
func New(prefix string) string {
	var b [Bytes]byte
	if _, err := rand.Read(b[:]); err != nil {
		panic("changeset: crypto/rand failed: " + err.Error()) // never returns an error on supported platforms
	}
	return prefix + base64.RawURLEncoding.EncodeToString(b[:])
}

// NewID returns a fresh change or run ID with the given prefix.
func NewID(prefix string) string {
	var b [idBytes]byte
	if _, err := rand.Read(b[:]); err != nil {
		panic("changeset: crypto/rand failed: " + err.Error())
	}
	return prefix + hex.EncodeToString(b[:])
}

// ValidID reports whether id has the shape of an ID with the prefix: the
// prefix and 20 lowercase hex characters.
func ValidID(id, prefix string) bool {
	rest, ok := strings.CutPrefix(id, prefix)
	if !ok || len(rest) != 2*idBytes {
		return false
	}
	for i := 0; i < len(rest); i++ {
		c := rest[i]
		if (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return false
		}
	}
	return true
}

// Valid reports whether tok has the shape of a token with the prefix.
// A malformed token is refused like a wrong one, before the ledger is asked.
func Valid(tok, prefix string) bool {
	rest, ok := strings.CutPrefix(tok, prefix)
	if !ok || len(rest) != chars {
		return false
	}
	_, err := base64.RawURLEncoding.DecodeString(rest)
	return err == nil
}

// Digest is what the ledger stores instead of a token: the SHA-256 of the
// purpose, the row's ID, the hash of the payload (or plan) the token
// unlocks, and the token, NUL-separated (none of them can contain NUL).
// Editing a stored payload, or its hash, therefore invalidates the token.
func Digest(purpose, id string, boundHash ledger.Digest, tok string) ledger.Digest {
	h := sha256.New()
	for _, s := range []string{"changeset-token-v1", purpose, id, string(boundHash), tok} {
		h.Write([]byte(s))
		h.Write([]byte{0})
	}
	return ledger.Digest(hex.EncodeToString(h.Sum(nil)))
}

// Matches compares a presented token with a stored digest (see [Digest])
// in constant time. An empty digest (a spent token) matches nothing.
func Matches(storedDigest ledger.Digest, purpose, id string, boundHash ledger.Digest, tok string) bool {
	if storedDigest == "" {
		return false
	}
	d := Digest(purpose, id, boundHash, tok)
	return subtle.ConstantTimeCompare([]byte(d), []byte(storedDigest)) == 1
}

// ScopeDigest is what the ledger stores instead of a caller's scope.
func ScopeDigest(scope string) ledger.Digest {
	sum := sha256.Sum256([]byte("changeset-scope-v1\x00" + scope))
	return ledger.Digest(hex.EncodeToString(sum[:]))
}
