package driver_test

import (
	"context"
	"errors"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/mcp-changeset/changeset-go/ledger"
	"github.com/mcp-changeset/changeset-go/ledger/driver"
	"github.com/mcp-changeset/changeset-go/ledger/sqlite"
)

// counting is a real SQLite backend that counts the changes it inserts,
// as a backend of another package would be wrapped.
type counting struct {
	*sqlite.Backend
	inserts *atomic.Int64
}

func (b counting) InsertChange(ctx context.Context, q driver.Querier, c *ledger.Change) error {
	b.inserts.Add(1)
	return b.Backend.InsertChange(ctx, q, c)
}

var _ driver.Backend = counting{}

// TestRegister_OpenReachesTheBackendOfTheTargetsScheme registers a backend
// for a scheme of its own and checks that ledger.Open hands it the target
// and the options, and that the Ledger it returns writes through it.
func TestRegister_OpenReachesTheBackendOfTheTargetsScheme(t *testing.T) {
	var inserts atomic.Int64
	var gotTarget string
	var gotOpts ledger.OpenOptions
	driver.Register("counting", func(ctx context.Context, target string, opts ledger.OpenOptions) (driver.Backend, error) {
		gotTarget, gotOpts = target, opts
		b, err := sqlite.Open(ctx, strings.TrimPrefix(target, "counting://"), opts)
		if err != nil {
			return nil, err
		}
		return counting{Backend: b, inserts: &inserts}, nil
	})
	ctx := context.Background()
	target := "counting://" + filepath.Join(t.TempDir(), "l.db")
	l, err := ledger.Open(ctx, target, ledger.OpenOptions{Create: true})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	if gotTarget != target || !gotOpts.Create || gotOpts.BusyTimeout != ledger.DefaultBusyTimeout {
		t.Errorf("the opener got %q, %+v; want the target and the options, BusyTimeout defaulted", gotTarget, gotOpts)
	}
	if _, ok := driver.BackendOf(l).(counting); !ok {
		t.Fatalf("BackendOf = %T, want the registered backend", driver.BackendOf(l))
	}
	err = l.WithTx(ctx, func(tx *ledger.Tx) error {
		return tx.InsertChange(&ledger.Change{ID: "chg_1", Action: "a", Status: ledger.Pending, ConfirmHash: "c", CreatedAt: l.Now(), UpdatedAt: l.Now(), ExpiresAt: l.Now()})
	})
	if err != nil {
		t.Fatal(err)
	}
	if inserts.Load() != 1 {
		t.Errorf("the registered backend stored %d changes, want 1", inserts.Load())
	}
	if c, err := l.Change(ctx, "chg_1"); err != nil || c.Action != "a" {
		t.Errorf("Change = %+v, %v", c, err)
	}
}

func TestRegister_PanicsOnASchemeRegisteredTwice(t *testing.T) {
	open := func(context.Context, string, ledger.OpenOptions) (driver.Backend, error) {
		return nil, errors.New("unused")
	}
	driver.Register("twice", open)
	defer func() {
		if r := recover(); r == nil || !strings.Contains(r.(string), "twice") {
			t.Fatalf("a second Register of one scheme: recover() = %v, want a panic naming the scheme", r)
		}
	}()
	driver.Register("twice", open)
}

// TestOpen_ReportsWhatTheOpenerSays checks the unhappy paths between
// ledger.Open and a registered opener: its error comes back as it is, a
// nil Backend without an error is refused, and a scheme nobody registered
// names the packages to import.
func TestOpen_ReportsWhatTheOpenerSays(t *testing.T) {
	refused := &ledger.Error{Op: "open", Location: "x", Err: ledger.ErrForeign}
	driver.Register("refusing", func(context.Context, string, ledger.OpenOptions) (driver.Backend, error) {
		return nil, refused
	})
	driver.Register("empty", func(context.Context, string, ledger.OpenOptions) (driver.Backend, error) {
		return nil, nil
	})
	ctx := context.Background()
	if _, err := ledger.Open(ctx, "refusing://x", ledger.OpenOptions{}); err != refused {
		t.Errorf("the opener's error: got %v, want it unchanged", err)
	}
	if l, err := ledger.Open(ctx, "empty://x", ledger.OpenOptions{}); err == nil || l != nil || !strings.Contains(err.Error(), "not a backend") {
		t.Errorf("an opener returning no backend: %v, %v", l, err)
	}
	_, err := ledger.Open(ctx, "nobody://x", ledger.OpenOptions{})
	var le *ledger.Error
	if !errors.As(err, &le) || !strings.Contains(err.Error(), `"nobody"`) || !strings.Contains(err.Error(), "ledger/postgres") {
		t.Errorf("an unknown scheme: %v; want a *ledger.Error naming it and the backend packages", err)
	}
}

// TestNewLedger_WrapsABackendAndBackendOfReturnsIt checks the round trip
// that backends' tests use: a Backend opened by hand, under a Ledger, and
// back.
func TestNewLedger_WrapsABackendAndBackendOfReturnsIt(t *testing.T) {
	ctx := context.Background()
	b, err := sqlite.Open(ctx, filepath.Join(t.TempDir(), "l.db"), ledger.OpenOptions{Create: true, BusyTimeout: ledger.DefaultBusyTimeout})
	if err != nil {
		t.Fatal(err)
	}
	l := driver.NewLedger(b)
	defer l.Close()
	if got := driver.BackendOf(l); got != driver.Backend(b) {
		t.Fatalf("BackendOf(NewLedger(b)) = %v, want b", got)
	}
	if err := l.WithTx(ctx, func(tx *ledger.Tx) error {
		return tx.InsertRun(&ledger.Run{ID: "run_1", Status: ledger.RunOpen, CreatedAt: l.Now(), UpdatedAt: l.Now()})
	}); err != nil {
		t.Fatal(err)
	}
	if r, err := b.GetRun(ctx, b.DB(), "run_1"); err != nil || r.Status != ledger.RunOpen {
		t.Errorf("the backend does not hold the Ledger's write: %+v, %v", r, err)
	}
}
