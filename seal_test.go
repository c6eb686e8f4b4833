package changeset

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/base64"
	"path/filepath"
	"testing"

	"github.com/mcp-changeset/changeset-go/internal/token"
	"github.com/mcp-changeset/changeset-go/ledger"
)

func testSealer(t *testing.T) *sealer {
	t.Helper()
	key := make([]byte, ApprovalKeySize)
	rand.Read(key)
	s, err := newSealer(key)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestSeal_OpensOnlyForItsCallUnderItsKey(t *testing.T) {
	s := testSealer(t)
	st := sealedState{Tool: "apply_change", ID: "chg_1", Purpose: token.PurposeApply, Hash: "h", Scope: "s", Expires: 42}
	sealed := s.seal(st)
	got, err := s.open(sealed, "apply_change", "chg_1")
	if err != nil || *got != st {
		t.Fatalf("open = %+v, %v", got, err)
	}
	if sealed == s.seal(st) {
		t.Error("two seals of one state are equal; the nonce is not random")
	}
	for _, tc := range []struct{ name, state, tool, id string }{
		{"other change", sealed, "apply_change", "chg_2"},
		{"other tool", sealed, "undo_change", "chg_1"},
		{"empty", "", "apply_change", "chg_1"},
		{"truncated", sealed[:len(sealed)-4], "apply_change", "chg_1"},
		{"padded base64", sealed + "==", "apply_change", "chg_1"},
		{"other key", testSealer(t).seal(st), "apply_change", "chg_1"},
	} {
		if _, err := s.open(tc.state, tc.tool, tc.id); err != errBadState {
			t.Errorf("%s: open = %v, want errBadState", tc.name, err)
		}
	}
	raw, _ := base64.RawURLEncoding.DecodeString(sealed)
	for i := range raw {
		flipped := bytes.Clone(raw)
		flipped[i] ^= 0x80
		if _, err := s.open(base64.RawURLEncoding.EncodeToString(flipped), "apply_change", "chg_1"); err != errBadState {
			t.Fatalf("byte %d flipped: open = %v", i, err)
		}
	}
}

func TestLoadApprovalKey_CreatedOnceAndKeptInTheLedger(t *testing.T) {
	ctx := context.Background()
	l, err := ledger.OpenContext(ctx, filepath.Join(t.TempDir(), "l.db"), ledger.OpenOptions{Create: true})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	a, err := loadApprovalKey(ctx, l, nil)
	if err != nil {
		t.Fatal(err)
	}
	b, err := loadApprovalKey(ctx, l, nil)
	if err != nil {
		t.Fatal(err)
	}
	st := sealedState{Tool: "t", ID: "i", Expires: 1}
	if _, err := b.open(a.seal(st), "t", "i"); err != nil {
		t.Fatalf("a second load does not share the first one's key: %v", err)
	}
	stored, ok, err := l.Backend().GetMeta(ctx, l.DB(), approvalKeyMeta)
	if err != nil || !ok || len(stored) != ApprovalKeySize {
		t.Fatalf("meta %s = %d bytes, %v, %v", approvalKeyMeta, len(stored), ok, err)
	}
	own, err := loadApprovalKey(ctx, l, bytes.Repeat([]byte{7}, ApprovalKeySize))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := own.open(a.seal(st), "t", "i"); err != errBadState {
		t.Fatalf("a state sealed under the ledger's key opened under the operator's: %v", err)
	}
}
