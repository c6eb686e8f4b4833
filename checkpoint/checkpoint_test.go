package checkpoint_test

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"crypto/sha256"
	"encoding/binary"
	"encoding/json"
	"errors"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/mcp-changeset/changeset-go/checkpoint"
	"github.com/mcp-changeset/changeset-go/ledger"
	_ "github.com/mcp-changeset/changeset-go/ledger/sqlite"
)

// newKey returns a fresh signing key.
func newKey(t *testing.T) ed25519.PrivateKey {
	t.Helper()
	_, key, err := ed25519.GenerateKey(nil)
	if err != nil {
		t.Fatal(err)
	}
	return key
}

// link is an arbitrary link to sign.
var link = ledger.Link{Seq: 42, Hash: sha256.Sum256([]byte("entry 42"))}

// at is an arbitrary time to sign at.
var at = time.Date(2026, 12, 6, 8, 30, 15, 0, time.UTC)

func TestSign_JSONHasExactlyTheFiveFields(t *testing.T) {
	key := newKey(t)
	st, err := checkpoint.Sign(key, link, at.Add(700*time.Millisecond).In(time.FixedZone("CET", 3600)))
	if err != nil {
		t.Fatal(err)
	}
	data, err := st.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	var fields map[string]any
	if err := json.Unmarshal(data, &fields); err != nil {
		t.Fatal(err)
	}
	var names []string
	for k := range fields {
		names = append(names, k)
	}
	slices.Sort(names)
	if want := []string{"at", "hash", "public_key", "seq", "signature"}; !slices.Equal(names, want) {
		t.Fatalf("the statement's fields are %q, want %q", names, want)
	}
	if fields["at"] != "2026-12-06T08:30:15Z" {
		t.Errorf("at = %v, want RFC 3339 in UTC to the second", fields["at"])
	}
	if fields["hash"] != link.Hash.String() || fields["seq"] != float64(42) {
		t.Errorf("seq, hash = %v, %v; want 42, %s", fields["seq"], fields["hash"], link.Hash)
	}
	if fields["public_key"] != checkpoint.FormatPublicKey(key.Public().(ed25519.PublicKey)) {
		t.Errorf("public_key = %v, want the key's public half in base64", fields["public_key"])
	}
	back, err := checkpoint.Parse(data)
	if err != nil {
		t.Fatal(err)
	}
	if err := checkpoint.Verify(back, key.Public().(ed25519.PublicKey)); err != nil {
		t.Fatalf("Verify of the statement read back: %v", err)
	}
}

// TestSign_SignsTheDocumentedMessage builds the signed bytes as the
// package documentation describes them, independently of the package.
func TestSign_SignsTheDocumentedMessage(t *testing.T) {
	key := newKey(t)
	st, err := checkpoint.Sign(key, link, at)
	if err != nil {
		t.Fatal(err)
	}
	msg := []byte("changeset-go checkpoint v1\x00")
	msg = binary.BigEndian.AppendUint64(msg, 42)
	msg = append(msg, link.Hash[:]...)
	msg = binary.BigEndian.AppendUint64(msg, uint64(at.Unix()))
	msg = binary.BigEndian.AppendUint32(msg, 0)
	if !ed25519.Verify(key.Public().(ed25519.PublicKey), msg, st.Signature) {
		t.Fatal("the signature does not cover the message the documentation describes")
	}
}

func TestVerify_RefusesAChangedStatement(t *testing.T) {
	key := newKey(t)
	pub := key.Public().(ed25519.PublicKey)
	for name, edit := range map[string]func(s *checkpoint.Statement){
		"seq":       func(s *checkpoint.Statement) { s.Seq++ },
		"hash":      func(s *checkpoint.Statement) { s.Hash[0] ^= 1 },
		"at":        func(s *checkpoint.Statement) { s.At = s.At.Add(time.Second) },
		"at's nano": func(s *checkpoint.Statement) { s.At = s.At.Add(time.Nanosecond) },
		"signature": func(s *checkpoint.Statement) { s.Signature[10] ^= 1 },
	} {
		t.Run(name, func(t *testing.T) {
			st, err := checkpoint.Sign(key, link, at)
			if err != nil {
				t.Fatal(err)
			}
			edit(st)
			if err := checkpoint.Verify(st, pub); !errors.Is(err, checkpoint.ErrBadSignature) {
				t.Fatalf("Verify of a statement with its %s changed = %v, want ErrBadSignature", name, err)
			}
			if err := checkpoint.Verify(st, nil); !errors.Is(err, checkpoint.ErrBadSignature) {
				t.Fatalf("Verify without a trusted key = %v, want ErrBadSignature", err)
			}
		})
	}
}

func TestVerify_RefusesAnotherKey(t *testing.T) {
	mine, theirs := newKey(t), newKey(t)
	st, err := checkpoint.Sign(theirs, link, at)
	if err != nil {
		t.Fatal(err)
	}
	if err := checkpoint.Verify(st, nil); err != nil {
		t.Fatalf("the statement does not verify under its own key: %v", err)
	}
	err = checkpoint.Verify(st, mine.Public().(ed25519.PublicKey))
	if !errors.Is(err, checkpoint.ErrUntrustedKey) || !strings.Contains(err.Error(), checkpoint.FormatPublicKey(theirs.Public().(ed25519.PublicKey))) {
		t.Fatalf("Verify under another trusted key = %v, want ErrUntrustedKey naming the signer's key", err)
	}
	// Swapping in the trusted key's public half does not help: the
	// signature is not that key's.
	st.PublicKey = mine.Public().(ed25519.PublicKey)
	if err := checkpoint.Verify(st, mine.Public().(ed25519.PublicKey)); !errors.Is(err, checkpoint.ErrBadSignature) {
		t.Fatalf("Verify with the trusted key swapped in = %v, want ErrBadSignature", err)
	}
}

func TestParse_RefusesWhatIsNotAStatement(t *testing.T) {
	st, err := checkpoint.Sign(newKey(t), link, at)
	if err != nil {
		t.Fatal(err)
	}
	good, _ := st.Marshal()
	var fields map[string]any
	json.Unmarshal(good, &fields)
	without := func(name string) []byte {
		m := map[string]any{}
		for k, v := range fields {
			if k != name {
				m[k] = v
			}
		}
		b, _ := json.Marshal(m)
		return b
	}
	extra, _ := json.Marshal(map[string]any{"seq": fields["seq"], "hash": fields["hash"], "at": fields["at"],
		"public_key": fields["public_key"], "signature": fields["signature"], "note": "trust me"})
	for name, tc := range map[string]struct {
		data []byte
		want string
	}{
		"no signature":  {without("signature"), "has no signature"},
		"no seq":        {without("seq"), "has no seq"},
		"no hash":       {without("hash"), "has no hash"},
		"unknown field": {extra, `unknown field "note"`},
		"short hash":    {bytes.Replace(good, []byte(link.Hash.String()), []byte("abcd"), 1), "64 hex characters"},
		"not JSON":      {[]byte("seq=42"), "not a checkpoint statement"},
		"two values":    {append(slices.Clone(good), good...), "more than one JSON value"},
	} {
		if _, err := checkpoint.Parse(tc.data); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Parse of a statement with %s = %v, want an error containing %q", name, err, tc.want)
		}
	}
}

// openLedger creates a SQLite ledger in a temporary directory.
func openLedger(t *testing.T) *ledger.Ledger {
	t.Helper()
	l, err := ledger.Open(context.Background(), filepath.Join(t.TempDir(), "ledger.db"), ledger.OpenOptions{Create: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	return l
}

// addChange writes a pending change, and so one history entry.
func addChange(t *testing.T, l *ledger.Ledger, id string) {
	t.Helper()
	now := l.Now()
	c := &ledger.Change{ID: id, Action: "a", Status: ledger.Pending, ScopeHash: "s", Payload: json.RawMessage(`{}`),
		ConfirmHash: ledger.Digest("confirm-" + id), CreatedAt: now, UpdatedAt: now, ExpiresAt: now.Add(time.Minute)}
	if err := l.WithTx(context.Background(), func(tx *ledger.Tx) error { return tx.InsertChange(c) }); err != nil {
		t.Fatal(err)
	}
}

// tamper runs a statement on the ledger's database, as someone with
// write access to it would.
func tamper(t *testing.T, l *ledger.Ledger, query string, args ...any) {
	t.Helper()
	if _, err := l.DB().ExecContext(context.Background(), query, args...); err != nil {
		t.Fatalf("%s: %v", query, err)
	}
}

func TestTake_SignsTheVerifiedHead(t *testing.T) {
	ctx := context.Background()
	l := openLedger(t)
	key := newKey(t)
	if _, err := checkpoint.Take(ctx, l, key); !errors.Is(err, checkpoint.ErrEmpty) {
		t.Fatalf("Take of an empty history = %v, want ErrEmpty", err)
	}
	addChange(t, l, "chg_1")
	addChange(t, l, "chg_2")
	st, err := checkpoint.Take(ctx, l, key)
	if err != nil {
		t.Fatal(err)
	}
	v, err := l.Verify(ctx, ledger.VerifyOptions{Checkpoints: []ledger.Link{st.Link()}})
	if err != nil || !v.OK() || st.Link() != v.Head || st.Seq != 2 {
		t.Fatalf("Take signed %+v; Verify with it = %+v, %v", st.Link(), v, err)
	}
	if err := checkpoint.Verify(st, key.Public().(ed25519.PublicKey)); err != nil {
		t.Fatal(err)
	}
}

func TestTake_RefusesABrokenHistory(t *testing.T) {
	l := openLedger(t)
	addChange(t, l, "chg_1")
	addChange(t, l, "chg_2")
	tamper(t, l, `UPDATE ledger_history SET actor = 'agent:mallory' WHERE seq = 1`)
	st, err := checkpoint.Take(context.Background(), l, newKey(t))
	var broken *checkpoint.BrokenError
	if !errors.As(err, &broken) || st != nil {
		t.Fatalf("Take of a tampered history = %v, %v; want a BrokenError and no statement", st, err)
	}
	if broken.Verification.FirstBad != 1 || !strings.Contains(err.Error(), "entry 1 ") {
		t.Fatalf("the refusal %q (first bad %d) does not name entry 1", err, broken.Verification.FirstBad)
	}
}
