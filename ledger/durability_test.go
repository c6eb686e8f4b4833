package ledger_test

import (
	"context"
	"errors"
	"flag"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/mcp-changeset/changeset-go/ledger"
)

// Durability is a flag: its names set it, anything else is refused with
// the two names, and it prints as its name.
func TestDurability_IsAFlag(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want ledger.Durability
	}{{nil, ledger.DurabilityFull}, {[]string{"--durability", "full"}, ledger.DurabilityFull}, {[]string{"--durability=claims"}, ledger.DurabilityClaims}} {
		set := flag.NewFlagSet("x", flag.ContinueOnError)
		var d ledger.Durability
		set.Var(&d, "durability", "")
		if err := set.Parse(tc.args); err != nil || d != tc.want || d.String() != tc.want.String() {
			t.Errorf("%v: %v (%v), want %v", tc.args, d, err, tc.want)
		}
	}
	set := flag.NewFlagSet("x", flag.ContinueOnError)
	set.SetOutput(io.Discard)
	var d ledger.Durability
	set.Var(&d, "durability", "")
	if err := set.Parse([]string{"--durability", "fast"}); err == nil || !strings.Contains(err.Error(), "use full") || !strings.Contains(err.Error(), "or claims") {
		t.Errorf("--durability fast: %v", err)
	}
	if s := ledger.Durability(7).String(); s != "Durability(7)" {
		t.Errorf("String of an unknown durability: %q", s)
	}
}

// Open refuses a durability that is neither constant, before it touches
// anything.
func TestOpen_RefusesAnUnknownDurability(t *testing.T) {
	path := filepath.Join(t.TempDir(), "ledger.db")
	_, err := ledger.Open(context.Background(), path, ledger.OpenOptions{Create: true, Durability: 7})
	if err == nil || !strings.Contains(err.Error(), "DurabilityClaims") {
		t.Fatalf("Open with Durability 7: %v", err)
	}
	if _, err := os.Stat(path); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("the refused Open left a file behind: %v", err)
	}
}
