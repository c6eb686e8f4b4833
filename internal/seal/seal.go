// Package seal seals the request state of a changeset Guard's user
// approval, and derives the tokens of the changes the user approves.
//
// With user approval, a tool call that asks the user returns an opaque
// request state that the client echoes with the user's answer. The
// specification tells servers to treat it as attacker-controlled, and
// go-sdk passes a pre-2026 client's own inputResponses and requestState to
// the handler unchanged. So the state is sealed: AES-256-GCM under a
// server key, binding the tool, the change or run, what the user was
// shown (the payload or plan hash), the caller's scope, the purpose and an
// expiry ([State]). A state that does not open, or opens to another
// binding, proves nothing and the call is refused. Single use is not the
// state's job: the ledger's claim moves the change out of its status, so
// a replayed state finds nothing to approve.
package seal

import (
	"context"
	"crypto/aes"
	"crypto/cipher"
	"crypto/hkdf"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/mcp-changeset/changeset-go/internal/token"
	"github.com/mcp-changeset/changeset-go/ledger"
)

// KeySize is the length of a server key: 32 bytes.
const KeySize = 32

// metaKey is the ledger meta key under which a generated server key is
// kept, so that every server sharing the ledger uses the same one.
const metaKey = "changeset.approval_key.v1"

// version is the first byte of every sealed state.
const version byte = 1

// Window is how long the user has to answer an approval question.
const Window = 10 * time.Minute

// State is what a sealed request state binds.
type State struct {
	Tool    string `json:"tool"`    // the tool name, with prefix
	ID      string `json:"id"`      // the change or run
	Purpose string `json:"purpose"` // token.PurposeApply, PurposeUndo or PurposeRunUndo
	Hash    string `json:"hash"`    // the payload hash, or the plan hash of a run
	Scope   string `json:"scope"`   // the scope hash of the caller
	Expires int64  `json:"exp"`     // Unix seconds
}

// A Sealer seals and opens request states under one key, and derives the
// tokens of changes that the user approves (see [Sealer.Token]).
type Sealer struct {
	aead     cipher.AEAD
	tokenKey []byte
}

// New returns a Sealer for key, which must be [KeySize] bytes. It derives
// the AES-256-GCM key and the token key from key with HKDF, so that a key
// an operator also uses elsewhere is never used here directly.
func New(key []byte) (*Sealer, error) {
	if len(key) != KeySize {
		return nil, fmt.Errorf("changeset: the approval key is %d bytes, want %d", len(key), KeySize)
	}
	k, err := hkdf.Key(sha256.New, key, nil, "changeset-go requestState v1", 32)
	if err != nil {
		return nil, err
	}
	block, err := aes.NewCipher(k)
	if err != nil {
		return nil, err
	}
	aead, err := cipher.NewGCM(block)
	if err != nil {
		return nil, err
	}
	tk, err := hkdf.Key(sha256.New, key, nil, "changeset-go approval tokens v1", 32)
	if err != nil {
		return nil, err
	}
	return &Sealer{aead: aead, tokenKey: tk}, nil
}

// Load returns the Sealer of a Guard: for key when the operator set one,
// else for the key kept in l's meta table, created on first use. Of
// several processes creating it at once, all end up with the one that was
// stored first.
func Load(ctx context.Context, l *ledger.Ledger, key []byte) (*Sealer, error) {
	if key != nil {
		return New(key)
	}
	stored, ok, err := l.Meta(ctx, metaKey)
	if err != nil {
		return nil, err
	}
	if !ok {
		fresh := make([]byte, KeySize)
		if _, err := rand.Read(fresh); err != nil {
			return nil, err
		}
		if stored, err = l.SetMetaIfAbsent(ctx, metaKey, fresh); err != nil {
			return nil, err
		}
	}
	s, err := New(stored)
	if err != nil {
		return nil, fmt.Errorf("changeset: the approval key kept in the ledger (%s) is unusable: %w", metaKey, err)
	}
	return s, nil
}

// Token derives the token of a change under user approval: the agent
// never holds one, so instead of a random token the Guard stores the
// digest of one derived from the server key, the change and its payload
// hash. The claim derives it again from the row it claims: a payload (and
// its hash) edited in the ledger by someone without the key yields another
// token, and the claim is refused.
func (s *Sealer) Token(prefix, purpose, id string, payloadHash ledger.Digest) string {
	m := hmac.New(sha256.New, s.tokenKey)
	for _, part := range []string{purpose, id, string(payloadHash)} {
		m.Write([]byte(part))
		m.Write([]byte{0})
	}
	return prefix + base64.RawURLEncoding.EncodeToString(m.Sum(nil)[:token.Bytes])
}

// ad is the additional data of a sealed state: the version, the tool and
// the ID. A state opens only for the call it was made for.
func ad(tool, id string) []byte {
	return []byte(string(version) + "changeset-go/requestState\x00" + tool + "\x00" + id)
}

// Seal returns st as an opaque, URL-safe string: version, 12-byte random
// nonce and the GCM ciphertext, in unpadded base64url.
func (s *Sealer) Seal(st State) string {
	plain, err := json.Marshal(st)
	if err != nil {
		panic("changeset: seal: " + err.Error()) // strings and an int64 always encode
	}
	nonce := make([]byte, s.aead.NonceSize())
	if _, err := rand.Read(nonce); err != nil {
		panic("changeset: crypto/rand failed: " + err.Error())
	}
	out := append([]byte{version}, nonce...)
	out = s.aead.Seal(out, nonce, plain, ad(st.Tool, st.ID))
	return base64.RawURLEncoding.EncodeToString(out)
}

// ErrBadState is any state that does not open: missing, undecodable,
// altered, made for another tool or ID, or sealed under another key. They
// are one error on purpose: the caller learns nothing about which.
var ErrBadState = errors.New("request state does not open")

// Open authenticates and decodes a state for the call to tool about id.
// It does not check the other bindings or the expiry: the caller compares
// them with the call's.
func (s *Sealer) Open(state, tool, id string) (*State, error) {
	raw, err := base64.RawURLEncoding.DecodeString(state)
	n := s.aead.NonceSize()
	if err != nil || len(raw) < 1+n+s.aead.Overhead() || raw[0] != version {
		return nil, ErrBadState
	}
	plain, err := s.aead.Open(nil, raw[1:1+n], raw[1+n:], ad(tool, id))
	if err != nil {
		return nil, ErrBadState
	}
	var st State
	if err := json.Unmarshal(plain, &st); err != nil || st.Tool != tool || st.ID != id {
		return nil, ErrBadState
	}
	return &st, nil
}

// ExpiresAt is the expiry of a state sealed now: the approval [Window], or
// the end of what it approves if that comes sooner (zero means none).
func ExpiresAt(now, end time.Time) time.Time {
	exp := now.Add(Window)
	if !end.IsZero() && end.Before(exp) {
		exp = end
	}
	return exp
}
