package seal

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/base64"
	"path/filepath"
	"testing"
	"time"

	"github.com/mcp-changeset/changeset-go/internal/token"
	"github.com/mcp-changeset/changeset-go/ledger"
	_ "github.com/mcp-changeset/changeset-go/ledger/sqlite"
)

func testSealer(t *testing.T) *Sealer {
	t.Helper()
	key := make([]byte, KeySize)
	rand.Read(key)
	s, err := New(key)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestSeal_OpensOnlyForItsCallUnderItsKey(t *testing.T) {
	s := testSealer(t)
	st := State{Tool: "apply_change", ID: "chg_1", Purpose: token.PurposeApply, Hash: "h", Scope: "s", Expires: 42}
	sealed := s.Seal(st)
	got, err := s.Open(sealed, "apply_change", "chg_1")
	if err != nil || *got != st {
		t.Fatalf("open = %+v, %v", got, err)
	}
	if sealed == s.Seal(st) {
		t.Error("two seals of one state are equal; the nonce is not random")
	}
	for _, tc := range []struct{ name, state, tool, id string }{
		{"other change", sealed, "apply_change", "chg_2"},
		{"other tool", sealed, "undo_change", "chg_1"},
		{"empty", "", "apply_change", "chg_1"},
		{"truncated", sealed[:len(sealed)-4], "apply_change", "chg_1"},
		{"padded base64", sealed + "==", "apply_change", "chg_1"},
		{"other key", testSealer(t).Seal(st), "apply_change", "chg_1"},
	} {
		if _, err := s.Open(tc.state, tc.tool, tc.id); err != ErrBadState {
			t.Errorf("%s: open = %v, want ErrBadState", tc.name, err)
		}
	}
	raw, _ := base64.RawURLEncoding.DecodeString(sealed)
	for i := range raw {
		flipped := bytes.Clone(raw)
		flipped[i] ^= 0x80
		if _, err := s.Open(base64.RawURLEncoding.EncodeToString(flipped), "apply_change", "chg_1"); err != ErrBadState {
			t.Fatalf("byte %d flipped: open = %v", i, err)
		}
	}
}

func TestLoad_KeyCreatedOnceAndKeptInTheLedger(t *testing.T) {
	ctx := context.Background()
	l, err := ledger.Open(ctx, filepath.Join(t.TempDir(), "l.db"), ledger.OpenOptions{Create: true})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	a, err := Load(ctx, l, nil)
	if err != nil {
		t.Fatal(err)
	}
	b, err := Load(ctx, l, nil)
	if err != nil {
		t.Fatal(err)
	}
	st := State{Tool: "t", ID: "i", Expires: 1}
	if _, err := b.Open(a.Seal(st), "t", "i"); err != nil {
		t.Fatalf("a second load does not share the first one's key: %v", err)
	}
	stored, ok, err := l.Meta(ctx, metaKey)
	if err != nil || !ok || len(stored) != KeySize {
		t.Fatalf("meta %s = %d bytes, %v, %v", metaKey, len(stored), ok, err)
	}
	own, err := Load(ctx, l, bytes.Repeat([]byte{7}, KeySize))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := own.Open(a.Seal(st), "t", "i"); err != ErrBadState {
		t.Fatalf("a state sealed under the ledger's key opened under the operator's: %v", err)
	}
}

func TestNew_RefusesAKeyOfAnotherSize(t *testing.T) {
	for _, n := range []int{0, 16, KeySize - 1, KeySize + 1} {
		if _, err := New(make([]byte, n)); err == nil {
			t.Errorf("New accepted a %d-byte key", n)
		}
	}
}

func TestToken_BindsKeyPurposeChangeAndPayload(t *testing.T) {
	s := testSealer(t)
	tok := s.Token(token.UndoPrefix, token.PurposeUndo, "chg_1", "h")
	if !token.Valid(tok, token.UndoPrefix) {
		t.Fatalf("Token = %q: not a valid undo token", tok)
	}
	if again := s.Token(token.UndoPrefix, token.PurposeUndo, "chg_1", "h"); again != tok {
		t.Fatalf("Token is not derived again alike: %q, then %q", tok, again)
	}
	for _, tc := range []struct {
		name string
		got  string
	}{
		{"other key", testSealer(t).Token(token.UndoPrefix, token.PurposeUndo, "chg_1", "h")},
		{"other purpose", s.Token(token.UndoPrefix, token.PurposeApply, "chg_1", "h")},
		{"other change", s.Token(token.UndoPrefix, token.PurposeUndo, "chg_2", "h")},
		{"other payload hash", s.Token(token.UndoPrefix, token.PurposeUndo, "chg_1", "h2")},
		{"parts shifted across the separator", s.Token(token.UndoPrefix, token.PurposeUndo, "chg_1h", "")},
	} {
		if tc.got == tok {
			t.Errorf("%s: the same token", tc.name)
		}
	}
}

func TestExpiresAt_IsTheWindowOrTheEndIfSooner(t *testing.T) {
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	for _, tc := range []struct {
		name     string
		end, exp time.Time
	}{
		{"no end", time.Time{}, now.Add(Window)},
		{"end after the window", now.Add(Window + time.Second), now.Add(Window)},
		{"end within the window", now.Add(time.Minute), now.Add(time.Minute)},
	} {
		if got := ExpiresAt(now, tc.end); !got.Equal(tc.exp) {
			t.Errorf("%s: ExpiresAt = %v, want %v", tc.name, got, tc.exp)
		}
	}
}
