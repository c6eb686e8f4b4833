package ledgertest

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/mcp-changeset/changeset-go/ledger"
	"github.com/mcp-changeset/changeset-go/ledger/driver"
)

func exerciseMeta(t *testing.T, h Harness) {
	runAll(t, h, []test{
		{"MissingKeyIsUnset", testMetaMissing},
		{"FirstValueWins", testMetaFirstWins},
		{"RacingWritersAllGetTheWinner", testMetaRace},
	})
}

func testMetaMissing(t *testing.T, h Harness) {
	ctx := context.Background()
	l, _ := open(t, h)
	if v, ok, err := driver.BackendOf(l).GetMeta(ctx, l.DB(), "k"); ok || v != nil || err != nil {
		t.Errorf("GetMeta of a missing key = %q, %v, %v", v, ok, err)
	}
}

func testMetaFirstWins(t *testing.T, h Harness) {
	ctx := context.Background()
	l, _ := open(t, h)
	b := driver.BackendOf(l)
	binary := []byte{0, 1, 2, 0xff, 0xfe, '\'', '\\'}
	if v, err := b.SetMetaIfAbsent(ctx, l.DB(), "k", binary); err != nil || string(v) != string(binary) {
		t.Errorf("first SetMetaIfAbsent = %q, %v", v, err)
	}
	if v, err := b.SetMetaIfAbsent(ctx, l.DB(), "k", []byte("other")); err != nil || string(v) != string(binary) {
		t.Errorf("second SetMetaIfAbsent = %q, %v; want the first value", v, err)
	}
	if v, ok, err := b.GetMeta(ctx, l.DB(), "k"); !ok || string(v) != string(binary) || err != nil {
		t.Errorf("GetMeta = %q, %v, %v", v, ok, err)
	}
	if v, err := b.SetMetaIfAbsent(ctx, l.DB(), "empty", nil); err != nil || v == nil || len(v) != 0 {
		t.Errorf("SetMetaIfAbsent(empty) = %#v, %v", v, err)
	}
	if v, ok, err := b.GetMeta(ctx, l.DB(), "empty"); !ok || v == nil || len(v) != 0 || err != nil {
		t.Errorf("GetMeta(empty) = %#v, %v, %v", v, ok, err)
	}
	err := l.WithTx(ctx, func(tx *ledger.Tx) error {
		v, err := b.SetMetaIfAbsent(ctx, tx.SQL(), "k", []byte("in tx"))
		if err == nil && string(v) != string(binary) {
			t.Errorf("SetMetaIfAbsent in a transaction = %q", v)
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
}

func testMetaRace(t *testing.T, h Harness) {
	ctx := ctxFor(t)
	l, _ := open(t, h)
	handles := []*ledger.Ledger{l}
	if h.OpenSecond != nil {
		handles = append(handles, second(t, h, l))
	}
	const writers = 12
	got := make([]string, writers)
	var wg sync.WaitGroup
	for i := range writers {
		wg.Go(func() {
			hl := handles[i%len(handles)]
			v, err := driver.BackendOf(hl).SetMetaIfAbsent(ctx, hl.DB(), "server-key", fmt.Appendf(nil, "value-%d", i))
			if err != nil {
				t.Errorf("writer %d: %v", i, err)
			}
			got[i] = string(v)
		})
	}
	wg.Wait()
	for i, v := range got {
		if v != got[0] || !strings.HasPrefix(v, "value-") {
			t.Errorf("writer %d got %q, writer 0 got %q: all must get the winner's value", i, v, got[0])
		}
	}
}
