package ledger_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"log/slog"
	"strings"
	"testing"

	"github.com/mcp-changeset/changeset-go/ledger"
)

// A Change or Run printed by any usual means shows no digest.
func TestDigest_NeverPrints(t *testing.T) {
	const secret = "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08"
	c := &ledger.Change{ID: "chg_1", ScopeHash: secret, PayloadHash: secret, StateHash: secret, ConfirmHash: secret, UndoHash: secret}
	r := &ledger.Run{ID: "run_1", ScopeHash: secret, PlanHash: secret, ConfirmHash: secret, SessionKey: secret}
	var out []string
	for _, v := range []any{c, *c, r, *r, c.ConfirmHash} {
		for _, verb := range []string{"%v", "%+v", "%#v", "%s", "%q", "%x", "%X"} {
			out = append(out, fmt.Sprintf(verb, v))
		}
		j, err := json.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, string(j))
	}
	var logged bytes.Buffer
	log := slog.New(slog.NewJSONHandler(&logged, nil))
	log.Info("x", "change", c, "digest", c.UndoHash, "run", r)
	slog.New(slog.NewTextHandler(&logged, nil)).Info("x", "digest", c.ScopeHash)
	out = append(out, logged.String())
	for _, s := range out {
		if strings.Contains(s, secret) || strings.Contains(strings.ToLower(s), fmt.Sprintf("%x", secret)[:16]) {
			t.Fatalf("a digest leaked: %s", s)
		}
	}
	if got := fmt.Sprint(c.UndoHash); got != "[digest]" {
		t.Fatalf("a digest prints as %q", got)
	}
	if got := fmt.Sprint(ledger.Digest("")); got != "" {
		t.Fatalf("an empty digest prints as %q", got)
	}
	if string(c.UndoHash) != secret {
		t.Fatal("string(d) must give the stored value to the code that stores it")
	}
}
