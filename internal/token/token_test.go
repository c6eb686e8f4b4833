package token

import (
	"strings"
	"testing"

	"github.com/mcp-changeset/changeset-go/ledger"
)

func TestNew_HasTheShapeValidAccepts(t *testing.T) {
	a, b := New(ConfirmPrefix), New(ConfirmPrefix)
	if a == b {
		t.Fatal("two tokens are equal; they are not random")
	}
	if !Valid(a, ConfirmPrefix) || len(a) != len(ConfirmPrefix)+32 {
		t.Fatalf("New = %q: not a valid confirmation token", a)
	}
	for _, tc := range []struct{ name, tok, prefix string }{
		{"other prefix", a, UndoPrefix},
		{"no prefix", strings.TrimPrefix(a, ConfirmPrefix), ConfirmPrefix},
		{"short", a[:len(a)-1], ConfirmPrefix},
		{"long", a + "A", ConfirmPrefix},
		{"padded", a[:len(a)-2] + "==", ConfirmPrefix},
		{"not base64url", a[:len(a)-1] + "+", ConfirmPrefix},
		{"empty", "", ConfirmPrefix},
	} {
		if Valid(tc.tok, tc.prefix) {
			t.Errorf("%s: Valid(%q, %q) = true", tc.name, tc.tok, tc.prefix)
		}
	}
}

func TestNewID_HasTheShapeValidIDAccepts(t *testing.T) {
	id := NewID(ChangeIDPrefix)
	if !ValidID(id, ChangeIDPrefix) || len(id) != len(ChangeIDPrefix)+20 {
		t.Fatalf("NewID = %q: not a valid change ID", id)
	}
	if id == NewID(ChangeIDPrefix) {
		t.Fatal("two IDs are equal; they are not random")
	}
	for _, bad := range []string{
		"run_" + id[len(ChangeIDPrefix):],        // another kind
		id[:len(id)-1],                           // short
		id + "0",                                 // long
		id[:len(id)-1] + "A",                     // upper case
		id[:len(id)-1] + "g",                     // not hex
		ChangeIDPrefix + strings.Repeat("é", 10), // 20 bytes, not hex
	} {
		if ValidID(bad, ChangeIDPrefix) {
			t.Errorf("ValidID(%q) = true", bad)
		}
	}
}

func TestDigest_BindsEveryPart(t *testing.T) {
	tok := New(UndoPrefix)
	d := Digest(PurposeUndo, "chg_1", "h", tok)
	if !Matches(d, PurposeUndo, "chg_1", "h", tok) {
		t.Fatal("a token does not match its own digest")
	}
	for _, tc := range []struct{ name, purpose, id, hash, tok string }{
		{"other purpose", PurposeApply, "chg_1", "h", tok},
		{"other change", PurposeUndo, "chg_2", "h", tok},
		{"other payload hash", PurposeUndo, "chg_1", "h2", tok},
		{"other token", PurposeUndo, "chg_1", "h", New(UndoPrefix)},
		{"parts shifted across the separator", PurposeUndo, "chg_1h", "", tok},
	} {
		if Matches(d, tc.purpose, tc.id, ledger.Digest(tc.hash), tc.tok) {
			t.Errorf("%s: matches", tc.name)
		}
	}
	if Matches("", PurposeUndo, "chg_1", "h", tok) {
		t.Error("an empty (spent) digest matches")
	}
}

func TestScopeDigest_DiffersPerScope(t *testing.T) {
	if ScopeDigest("a") == ScopeDigest("b") || ScopeDigest("") == ScopeDigest("a") {
		t.Fatal("two scopes share a digest")
	}
	if a, again := ScopeDigest("a"), ScopeDigest("a"); a != again {
		t.Fatal("one scope has two digests")
	}
	if len(ScopeDigest("a")) != 64 {
		t.Fatalf("ScopeDigest = %q, want 64 hex characters", ScopeDigest("a"))
	}
}
