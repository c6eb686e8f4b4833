package seal

import (
	"crypto/rand"
	"testing"

	"github.com/mcp-changeset/changeset-go/internal/token"
)

// FuzzOpenSealedState feeds arbitrary request states to open: none may
// panic, and whatever opens must be exactly the state this sealer made, for
// the call it was made for. (A spelling of the same bytes that base64
// tolerates, such as an inserted newline, may open: it carries nothing
// new.) The seeds include a genuine state and mutations of it.
func FuzzOpenSealedState(f *testing.F) {
	key := make([]byte, KeySize)
	rand.Read(key)
	s, err := New(key)
	if err != nil {
		f.Fatal(err)
	}
	want := State{Tool: "apply_change", ID: "chg_00000000000000000001", Purpose: token.PurposeApply, Hash: "h", Scope: "s", Expires: 42}
	genuine := s.Seal(want)
	f.Add(genuine, "apply_change", "chg_00000000000000000001")
	f.Add(genuine[:len(genuine)-1], "apply_change", "chg_00000000000000000001")
	f.Add(genuine+"A", "apply_change", "chg_00000000000000000001")
	f.Add(genuine, "undo_change", "chg_00000000000000000001")
	f.Add("", "apply_change", "chg_00000000000000000001")
	f.Add("v1.AAAA", "apply_change", "")
	f.Fuzz(func(t *testing.T, state, tool, id string) {
		st, err := s.Open(state, tool, id)
		if err != nil {
			return
		}
		if *st != want || tool != want.Tool || id != want.ID {
			t.Fatalf("a state this sealer did not make for this call opened: %q for %s %s → %+v", state, tool, id, st)
		}
	})
}
