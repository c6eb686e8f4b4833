package changeset

import (
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"encoding/hex"
	"strings"

	"github.com/mcp-changeset/changeset-go/internal/canonjson"
	"github.com/mcp-changeset/changeset-go/ledger"
)

// Token and ID formats. A token is its purpose's prefix followed by 24
// random bytes in unpadded URL-safe base64 (32 characters, 192 bits). An ID
// is its kind's prefix followed by 10 random bytes in lowercase hex.
const (
	confirmPrefix = "confirm_"
	undoPrefix    = "undo_"
	tokenBytes    = 24
	tokenChars    = 32 // base64.RawURLEncoding.EncodedLen(tokenBytes)

	changeIDPrefix = "chg_"
	runIDPrefix    = "run_"
	idBytes        = 10
)

// Token purposes. A digest binds the purpose, so an undo token can never
// pass as a confirmation token and the reverse.
const (
	purposeApply   = "apply"
	purposeUndo    = "undo"
	purposeRunUndo = "run-undo"
)

// newToken returns a fresh token with the given prefix.
func newToken(prefix string) string {
	var b [tokenBytes]byte
	if _, err := rand.Read(b[:]); err != nil {
		panic("changeset: crypto/rand failed: " + err.Error()) // never returns an error on supported platforms
	}
	return prefix + base64.RawURLEncoding.EncodeToString(b[:])
}

// newID returns a fresh change or run ID with the given prefix.
func newID(prefix string) string {
	var b [idBytes]byte
	if _, err := rand.Read(b[:]); err != nil {
		panic("changeset: crypto/rand failed: " + err.Error())
	}
	return prefix + hex.EncodeToString(b[:])
}

// validID reports whether id has the shape of an ID with the prefix: the
// prefix and 20 lowercase hex characters.
func validID(id, prefix string) bool {
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

// validToken reports whether tok has the shape of a token with the prefix.
// A malformed token is refused like a wrong one, before the ledger is asked.
func validToken(tok, prefix string) bool {
	rest, ok := strings.CutPrefix(tok, prefix)
	if !ok || len(rest) != tokenChars {
		return false
	}
	_, err := base64.RawURLEncoding.DecodeString(rest)
	return err == nil
}

// tokenDigest is what the ledger stores instead of a token: the SHA-256 of
// the purpose, the row's ID, the hash of the payload (or plan) the token
// unlocks, and the token, NUL-separated (none of them can contain NUL).
// Editing a stored payload, or its hash, therefore invalidates the token.
func tokenDigest(purpose, id string, boundHash ledger.Digest, token string) ledger.Digest {
	h := sha256.New()
	for _, s := range []string{"changeset-token-v1", purpose, id, string(boundHash), token} {
		h.Write([]byte(s))
		h.Write([]byte{0})
	}
	return ledger.Digest(hex.EncodeToString(h.Sum(nil)))
}

// tokenMatches compares a presented token with a stored digest in constant
// time. An empty digest (a spent token) matches nothing.
func tokenMatches(storedDigest ledger.Digest, purpose, id string, boundHash ledger.Digest, token string) bool {
	if storedDigest == "" {
		return false
	}
	d := tokenDigest(purpose, id, boundHash, token)
	return subtle.ConstantTimeCompare([]byte(d), []byte(storedDigest)) == 1
}

// scopeHash is what the ledger stores instead of a scope.
func scopeHash(scope string) ledger.Digest {
	sum := sha256.Sum256([]byte("changeset-scope-v1\x00" + scope))
	return ledger.Digest(hex.EncodeToString(sum[:]))
}

// hashOf is the digest of canonical JSON, as the ledger stores it.
func hashOf(canonical []byte) ledger.Digest { return ledger.Digest(canonjson.Hash(canonical)) }
