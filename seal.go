package changeset

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

// With user approval, a tool call that asks the user returns an opaque
// requestState that the client echoes with the user's answer. The
// specification tells servers to treat it as attacker-controlled, and
// go-sdk passes a pre-2026 client's own inputResponses and requestState to
// the handler unchanged. So the state is sealed: AES-256-GCM under a server
// key, binding the tool, the change or run, what the user was shown (the
// payload or plan hash), the caller's scope, the purpose and an expiry. A
// state that does not open, or opens to another binding, proves nothing and
// the call is refused. Single use is not the state's job: the ledger's
// claim moves the change out of its status, so a replayed state finds
// nothing to approve.

// ApprovalKeySize is the length of Options.ApprovalKey: 32 bytes.
const ApprovalKeySize = 32

// approvalKeyMeta is the ledger meta key under which a generated approval
// key is kept, so that every server sharing the ledger uses the same one.
const approvalKeyMeta = "changeset.approval_key.v1"

// stateVersion is the first byte of every sealed state.
const stateVersion byte = 1

// approvalWindow is how long the user has to answer an approval question.
const approvalWindow = 10 * time.Minute

// sealedState is what a requestState binds.
type sealedState struct {
	Tool    string `json:"tool"`    // the tool name, with prefix
	ID      string `json:"id"`      // the change or run
	Purpose string `json:"purpose"` // token.PurposeApply, token.PurposeUndo or token.PurposeRunUndo
	Hash    string `json:"hash"`    // the payload hash, or the plan hash of a run
	Scope   string `json:"scope"`   // the scope hash of the caller
	Expires int64  `json:"exp"`     // Unix seconds
}

// sealer seals and opens request states under one key, and derives the
// tokens of changes that the user approves (see tokenFor).
type sealer struct {
	aead     cipher.AEAD
	tokenKey []byte
}

// newSealer derives the AES-256-GCM key from the server key with HKDF, so
// that a key an operator also uses elsewhere is never used here directly.
func newSealer(key []byte) (*sealer, error) {
	if len(key) != ApprovalKeySize {
		return nil, fmt.Errorf("changeset: the approval key is %d bytes, want %d", len(key), ApprovalKeySize)
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
	return &sealer{aead: aead, tokenKey: tk}, nil
}

// tokenFor derives the token of a change under user approval: the agent
// never holds one, so instead of a random token the Guard stores the
// digest of one derived from the approval key, the change and its payload
// hash. The claim derives it again from the row it claims: a payload (and
// its hash) edited in the ledger by someone without the key yields another
// token, and the claim is refused.
func (s *sealer) tokenFor(prefix, purpose, id string, payloadHash ledger.Digest) string {
	m := hmac.New(sha256.New, s.tokenKey)
	for _, part := range []string{purpose, id, string(payloadHash)} {
		m.Write([]byte(part))
		m.Write([]byte{0})
	}
	return prefix + base64.RawURLEncoding.EncodeToString(m.Sum(nil)[:token.Bytes])
}

// stateAD is the additional data of a sealed state: the version, the tool
// and the ID. A state opens only for the call it was made for.
func stateAD(tool, id string) []byte {
	return []byte(string(stateVersion) + "changeset-go/requestState\x00" + tool + "\x00" + id)
}

// seal returns st as an opaque, URL-safe string: version, 12-byte random
// nonce and the GCM ciphertext, in unpadded base64url.
func (s *sealer) seal(st sealedState) string {
	plain, err := json.Marshal(st)
	if err != nil {
		panic("changeset: seal: " + err.Error()) // strings and an int64 always encode
	}
	nonce := make([]byte, s.aead.NonceSize())
	if _, err := rand.Read(nonce); err != nil {
		panic("changeset: crypto/rand failed: " + err.Error())
	}
	out := append([]byte{stateVersion}, nonce...)
	out = s.aead.Seal(out, nonce, plain, stateAD(st.Tool, st.ID))
	return base64.RawURLEncoding.EncodeToString(out)
}

// errBadState is any state that does not open: missing, undecodable,
// altered, made for another tool or ID, or sealed under another key. They
// are one error on purpose: the caller learns nothing about which.
var errBadState = errors.New("request state does not open")

// open authenticates and decodes a state for the call to tool about id.
// It does not check the other bindings or the expiry; see checkState.
func (s *sealer) open(state, tool, id string) (*sealedState, error) {
	raw, err := base64.RawURLEncoding.DecodeString(state)
	n := s.aead.NonceSize()
	if err != nil || len(raw) < 1+n+s.aead.Overhead() || raw[0] != stateVersion {
		return nil, errBadState
	}
	plain, err := s.aead.Open(nil, raw[1:1+n], raw[1+n:], stateAD(tool, id))
	if err != nil {
		return nil, errBadState
	}
	var st sealedState
	if err := json.Unmarshal(plain, &st); err != nil || st.Tool != tool || st.ID != id {
		return nil, errBadState
	}
	return &st, nil
}

// expiresAt is the expiry of a state sealed now: the approval window, or
// the end of what it approves if that comes sooner (zero means none).
func expiresAt(now, end time.Time) time.Time {
	exp := now.Add(approvalWindow)
	if !end.IsZero() && end.Before(exp) {
		exp = end
	}
	return exp
}

// loadApprovalKey returns the key that seals request states: key when the
// operator set one, else the key kept in the ledger's meta table, created
// on first use. Of several processes creating it at once, all end up with
// the one that was stored first.
func loadApprovalKey(ctx context.Context, l *ledger.Ledger, key []byte) (*sealer, error) {
	if key != nil {
		return newSealer(key)
	}
	b := l.Backend()
	stored, ok, err := b.GetMeta(ctx, b.DB(), approvalKeyMeta)
	if err != nil {
		return nil, err
	}
	if !ok {
		fresh := make([]byte, ApprovalKeySize)
		if _, err := rand.Read(fresh); err != nil {
			return nil, err
		}
		if stored, err = b.SetMetaIfAbsent(ctx, b.DB(), approvalKeyMeta, fresh); err != nil {
			return nil, err
		}
	}
	s, err := newSealer(stored)
	if err != nil {
		return nil, fmt.Errorf("changeset: the approval key kept in the ledger (%s) is unusable: %w", approvalKeyMeta, err)
	}
	return s, nil
}
