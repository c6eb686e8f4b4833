package ledger_test

import (
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/mcp-changeset/changeset-go/ledger"
	"github.com/mcp-changeset/changeset-go/ledger/driver"
)

// TestBackendInterfaces_MatchPackageDriver holds package ledger's
// unexported copies of the backend interfaces to package driver's: the
// same method names with the same signatures, so that every driver.Backend
// is a backend to the Ledger and the reverse. It fails when a method is
// added to, removed from or changed in one copy only.
func TestBackendInterfaces_MatchPackageDriver(t *testing.T) {
	for _, pair := range []struct {
		name         string
		inLedger, in reflect.Type
	}{
		{"Backend", ledger.BackendType, reflect.TypeFor[driver.Backend]()},
		{"WriteQueue", ledger.WriteQueueType, reflect.TypeFor[driver.WriteQueue]()},
		{"ErrorInterpreter", ledger.ErrorInterpreterType, reflect.TypeFor[driver.ErrorInterpreter]()},
		{"Compactor", ledger.CompactorType, reflect.TypeFor[driver.Compactor]()},
		{"DurableWriter", ledger.DurableWriterType, reflect.TypeFor[driver.DurableWriter]()},
		{"ChainAppender", ledger.ChainAppenderType, reflect.TypeFor[driver.ChainAppender]()},
	} {
		if diff := methodDiff(pair.inLedger, pair.in); diff != "" {
			t.Errorf("package ledger's copy of driver.%s has drifted from it:\n%s", pair.name, diff)
		}
	}
}

// methodDiff lists the methods of interface a that interface b lacks or
// declares otherwise, and the reverse; "" when their method sets are the
// same.
func methodDiff(a, b reflect.Type) string {
	var out []string
	sig := func(t reflect.Type) map[string]string {
		m := map[string]string{}
		for i := range t.NumMethod() {
			meth := t.Method(i)
			m[meth.Name] = meth.Type.String()
		}
		return m
	}
	inA, inB := sig(a), sig(b)
	for name, s := range inA {
		switch other, ok := inB[name]; {
		case !ok:
			out = append(out, "  only in ledger: "+name+" "+s)
		case other != s:
			out = append(out, "  "+name+": ledger has "+s+", driver has "+other)
		}
	}
	for name, s := range inB {
		if _, ok := inA[name]; !ok {
			out = append(out, "  only in driver: "+name+" "+s)
		}
	}
	if len(out) == 0 && (!a.Implements(b) || !b.Implements(a)) {
		// Same names and printed signatures, yet types that differ (a
		// parameter of another package with the same name).
		out = append(out, "  the signatures print alike but are not identical types")
	}
	slices.Sort(out)
	return strings.Join(out, "\n")
}
