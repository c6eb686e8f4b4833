// Package checkpoint signs the newest link of a ledger's history, so that
// a copy kept elsewhere can later prove that the history was not rewritten.
//
// A ledger's history is a hash chain (see [ledger.HistoryHash]): an entry
// edited, deleted or moved no longer chains to the entries after it, and
// [ledger.Ledger.Verify] names it. Someone who can write the database can
// still rewrite every entry after some point and hash them all again, into
// a chain that holds together. A checkpoint detects that: it is a
// [Statement] that the history's entry Seq had hash Hash at time At,
// signed with an Ed25519 key. Kept where whoever can write the ledger
// cannot reach it (another host, object storage with retention, a ticket),
// it is checked with
//
//	mcp-changeset verify --checkpoint checkpoint-1234.json --public-key KEY
//
// which fails when the history no longer holds that entry with that hash.
//
// [Take] verifies the history and signs its head; [Schedule] does it every
// hour (or every Every) in a server, writing each statement to a file; the
// command mcp-changeset checkpoint does it once. [LoadOrCreateKey] reads
// the signing key, or makes it on first use.
//
// # The statement
//
// A statement is JSON with exactly these fields:
//
//	{
//	  "seq": 1234,
//	  "hash": "3f5a…",                 // the entry's hash, 64 hex characters
//	  "at": "2026-12-06T08:00:00Z",    // when it was signed, RFC 3339, UTC
//	  "public_key": "base64…",         // the Ed25519 public key, 32 bytes
//	  "signature": "base64…"           // the Ed25519 signature, 64 bytes
//	}
//
// (standard base64, with padding). The signature covers these bytes:
//
//	"changeset-go checkpoint v1" 0x00   domain: no other message starts so
//	seq                                 8 bytes, unsigned, big-endian
//	hash                                32 bytes
//	at, Unix seconds                    8 bytes, two's complement, big-endian
//	at, nanoseconds within the second   4 bytes, unsigned, big-endian
//
// Every part has a fixed length, so no two statements sign the same bytes,
// and the domain keeps a checkpoint's signature from being taken for the
// signature of anything else made with the same key. The public key is not
// signed: an Ed25519 signature verifies under one key only, and whether
// that key is one to trust is the verifier's question (see [Verify]).
package checkpoint

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/mcp-changeset/changeset-go/ledger"
)

// domain starts every signed message (see the package documentation).
const domain = "changeset-go checkpoint v1\x00"

// A Statement is a signed checkpoint: the history's entry Seq had hash
// Hash when it was signed, at At, by the holder of the private half of
// PublicKey. Its JSON form is the one the package documentation shows.
type Statement struct {
	// Seq is the entry's number in the history's chain.
	Seq int64 `json:"seq"`
	// Hash is the entry's hash, as the ledger stores it.
	Hash ledger.Hash `json:"hash"`
	// At is when the statement was signed, in UTC, to the second.
	At time.Time `json:"at"`
	// PublicKey is the Ed25519 public key that Signature verifies under.
	PublicKey ed25519.PublicKey `json:"public_key"`
	// Signature is the Ed25519 signature of the statement's message.
	Signature []byte `json:"signature"`
}

// Link returns the place in the chain the statement vouches for, for
// [ledger.VerifyOptions].Checkpoints.
func (s *Statement) Link() ledger.Link { return ledger.Link{Seq: s.Seq, Hash: s.Hash} }

// message returns the bytes the signature covers.
func (s *Statement) message() []byte {
	b := make([]byte, 0, len(domain)+8+len(s.Hash)+8+4)
	b = append(b, domain...)
	b = binary.BigEndian.AppendUint64(b, uint64(s.Seq))
	b = append(b, s.Hash[:]...)
	b = binary.BigEndian.AppendUint64(b, uint64(s.At.Unix()))
	b = binary.BigEndian.AppendUint32(b, uint32(s.At.Nanosecond()))
	return b
}

// Sign returns the statement that link was the history's head at at,
// signed with key. at is kept in UTC, to the second. Sign vouches for
// whatever link it is given: verify the history first, as [Take] does.
func Sign(key ed25519.PrivateKey, link ledger.Link, at time.Time) (*Statement, error) {
	if len(key) != ed25519.PrivateKeySize {
		return nil, fmt.Errorf("checkpoint: the signing key is %d bytes, not an Ed25519 private key (%d)", len(key), ed25519.PrivateKeySize)
	}
	if link.Seq <= 0 {
		return nil, ErrEmpty
	}
	s := &Statement{Seq: link.Seq, Hash: link.Hash, At: at.UTC().Truncate(time.Second)}
	s.PublicKey = key.Public().(ed25519.PublicKey)
	s.Signature = ed25519.Sign(key, s.message())
	return s, nil
}

// Errors of Verify, Sign and Take, to match with errors.Is.
var (
	// ErrBadSignature: the signature does not verify under the
	// statement's public key, so a field changed after it was signed, or
	// it was never signed with that key.
	ErrBadSignature = errors.New("checkpoint: the signature does not match the statement's seq, hash and at: the statement was changed after it was signed, or was not signed with its public_key")
	// ErrUntrustedKey: the statement names another public key than the
	// one the verifier trusts; its signature is not even looked at.
	ErrUntrustedKey = errors.New("checkpoint: the statement was signed by another key than the trusted one")
	// ErrEmpty: the history has no entry to sign yet.
	ErrEmpty = errors.New("checkpoint: the history is empty: there is no entry to sign yet")
)

// Verify checks the statement's signature. When trusted is not nil, the
// statement must also name trusted as its public key: a statement proves
// something only when its key is one the operator kept apart from the
// ledger, since anyone can sign a statement with a key of their own. With
// trusted nil, Verify only shows that the statement is whole as its key
// signed it.
//
// The error matches [ErrUntrustedKey] or [ErrBadSignature], or says what
// is missing from the statement.
func Verify(s *Statement, trusted ed25519.PublicKey) error {
	switch {
	case s.Seq <= 0:
		return fmt.Errorf("checkpoint: seq %d names no history entry (they start at 1)", s.Seq)
	case len(s.PublicKey) != ed25519.PublicKeySize:
		return fmt.Errorf("checkpoint: public_key is %d bytes, not an Ed25519 public key (%d)", len(s.PublicKey), ed25519.PublicKeySize)
	case len(s.Signature) != ed25519.SignatureSize:
		return fmt.Errorf("checkpoint: signature is %d bytes, not an Ed25519 signature (%d)", len(s.Signature), ed25519.SignatureSize)
	case trusted != nil && !s.PublicKey.Equal(trusted):
		return fmt.Errorf("%w: signed by %s, trusted %s", ErrUntrustedKey, FormatPublicKey(s.PublicKey), FormatPublicKey(trusted))
	case !ed25519.Verify(s.PublicKey, s.message(), s.Signature):
		return ErrBadSignature
	}
	return nil
}

// Parse decodes a statement from its JSON form. It refuses fields it does
// not know and a statement missing one; it does not check the signature
// (see [Verify]).
func Parse(data []byte) (*Statement, error) {
	var s Statement
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&s); err != nil {
		return nil, fmt.Errorf("checkpoint: not a checkpoint statement: %w", err)
	}
	if dec.More() {
		return nil, errors.New("checkpoint: not a checkpoint statement: more than one JSON value")
	}
	var missing []string
	for name, absent := range map[string]bool{"seq": s.Seq == 0, "hash": s.Hash.IsZero(), "at": s.At.IsZero(),
		"public_key": len(s.PublicKey) == 0, "signature": len(s.Signature) == 0} {
		if absent {
			missing = append(missing, name)
		}
	}
	if len(missing) > 0 {
		return nil, fmt.Errorf("checkpoint: the statement has no %s (want seq, hash, at, public_key and signature)", joinSorted(missing))
	}
	return &s, nil
}

// ReadFile reads and parses the statement in the file at path.
func ReadFile(path string) (*Statement, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("checkpoint: %w", err)
	}
	s, err := Parse(data)
	if err != nil {
		return nil, fmt.Errorf("%w (in %s)", err, path)
	}
	return s, nil
}

// Marshal returns the statement's JSON form, indented, with a final
// newline: what the command and a Schedule write.
func (s *Statement) Marshal() ([]byte, error) {
	b, err := json.MarshalIndent(s, "", "  ")
	if err != nil {
		return nil, err
	}
	return append(b, '\n'), nil
}

// Chain is the part of a ledger Take reads; *ledger.Ledger has it.
type Chain interface {
	Verify(ctx context.Context, opts ledger.VerifyOptions) (*ledger.Verification, error)
}

// BrokenError is Take's refusal to sign a history that does not verify:
// a checkpoint of a damaged history would vouch for the damage.
type BrokenError struct {
	// Verification is what Verify found.
	Verification *ledger.Verification
}

func (e *BrokenError) Error() string {
	v := e.Verification
	more := ""
	if n := len(v.Problems); n > 1 {
		more = fmt.Sprintf(" (and %d more)", n-1)
	}
	return fmt.Sprintf("checkpoint: not signed: the history does not verify: %s%s; run mcp-changeset verify for every problem", v.Problems[0], more)
}

// Take verifies the history of c (see [ledger.Ledger.Verify]) and signs
// its head, at now. It refuses with a *[BrokenError] when the history
// does not verify, and with [ErrEmpty] when it has no entry yet.
//
// Verifying reads the whole history, so Take costs what Verify costs; it
// reads one snapshot, so the head it signs is the head it verified. A
// Schedule verifies, after its first checkpoint, only what was written
// since the last one.
func Take(ctx context.Context, c Chain, key ed25519.PrivateKey) (*Statement, error) {
	return take(ctx, c, key, ledger.Link{}, time.Now())
}

// take is Take with the link of an earlier checkpoint, verified then and
// signed by the same key (zero for none), and the time to sign at. With
// an earlier checkpoint it verifies only what came after it (see
// ledger.VerifyOptions.After), which the history must still hold: a
// schedule's checkpoint costs what was written since the last one.
func take(ctx context.Context, c Chain, key ed25519.PrivateKey, prev ledger.Link, now time.Time) (*Statement, error) {
	if len(key) != ed25519.PrivateKeySize {
		return nil, fmt.Errorf("checkpoint: the signing key is %d bytes, not an Ed25519 private key (%d)", len(key), ed25519.PrivateKeySize)
	}
	v, err := c.Verify(ctx, ledger.VerifyOptions{After: prev})
	if err != nil {
		return nil, fmt.Errorf("checkpoint: not signed: %w", err)
	}
	if !v.OK() {
		return nil, &BrokenError{Verification: v}
	}
	return Sign(key, v.Head, now)
}
