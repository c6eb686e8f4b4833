package undoplan

import (
	"encoding/json"
	"slices"
	"testing"
	"time"

	"github.com/mcp-changeset/changeset-go/internal/voice"
	"github.com/mcp-changeset/changeset-go/ledger"
)

func step(c *ledger.Change) *Step {
	return &Step{C: c, Op: Op{Registered: true, HasUndo: true, Observes: true}, Keys: Keys(c)}
}

func raw(s string) json.RawMessage {
	if s == "" {
		return nil
	}
	return json.RawMessage(s)
}

// Keys, Split and Removes read a change of one resource, of several, and
// of none alike.
func TestKeysSplitRemoves(t *testing.T) {
	one := &ledger.Change{ID: "chg_1", Resource: "flag:beta", Before: raw("null"), After: raw(`{"rollout":10}`)}
	several := &ledger.Change{ID: "chg_2", Resources: []string{"row:a", "row:b"},
		Before: raw(`{"row:a":{"v":1},"row:b":null}`), After: raw(`{"row:a":{"v":2},"row:b":{"v":3}}`)}
	none := &ledger.Change{ID: "chg_3", Before: raw(`1`), After: raw(`2`)}

	if got := Keys(one); !slices.Equal(got, []string{"r:flag:beta"}) {
		t.Errorf("Keys(one) = %v", got)
	}
	if got := Keys(several); !slices.Equal(got, []string{"r:row:a", "r:row:b"}) {
		t.Errorf("Keys(several) = %v", got)
	}
	if got := Keys(none); !slices.Equal(got, []string{"c:chg_3"}) {
		t.Errorf("Keys(none) = %v", got)
	}
	if got := Split(step(several), several.After); string(got["r:row:a"]) != `{"v":2}` || string(got["r:row:b"]) != `{"v":3}` {
		t.Errorf("Split(several) = %s", got)
	}
	if got := Split(step(several), raw(`{"row:a":{"v":2}}`)); string(got["r:row:b"]) != "null" {
		t.Errorf("a resource missing from a States reads %s, want null", got["r:row:b"])
	}
	if got := Split(step(one), nil); got != nil {
		t.Errorf("Split of no state = %v, want nil", got)
	}
	if got := Removes(one); !slices.Equal(got, []string{"flag:beta"}) {
		t.Errorf("Removes(one) = %v", got)
	}
	if got := Removes(several); !slices.Equal(got, []string{"row:b"}) {
		t.Errorf("Removes(several) = %v, want only the row it created", got)
	}
	if got := Removes(none); got != nil {
		t.Errorf("Removes(none) = %v, want nothing: it names no resource", got)
	}
}

// A kept change keeps its resource: the older change of it is kept even
// though the resource reads exactly as that older change left it.
func TestPass_KeptChangeKeepsItsResource(t *testing.T) {
	now := time.Unix(1000, 0)
	c2 := &ledger.Change{ID: "chg_2", Status: ledger.Applied, Undoable: true, Resource: "flag:beta", Before: raw(`50`), After: raw(`100`)}
	c1 := &ledger.Change{ID: "chg_1", Status: ledger.Applied, Undoable: true, Resource: "flag:beta", Before: raw(`10`), After: raw(`50`)}
	p := NewPass(now, nil, voice.New("", "", voice.Token))
	s2, s1 := step(c2), step(c1)
	found := map[string]json.RawMessage{"r:flag:beta": raw(`50`)} // a person set it back to 50
	if !p.Precheck(s2) || p.Check(s2, found, nil, Planning) {
		t.Fatalf("c2 = %+v, want it checked and kept", s2)
	}
	p.Settle(s2)
	if p.Precheck(s1) {
		if p.Check(s1, found, nil, Planning) {
			t.Fatalf("c1 is undone although c2 keeps the flag: %+v", s1)
		}
	}
	if s1.Verdict != Skip || len(s1.Drift) != 0 {
		t.Fatalf("c1 = %+v, want a skip with no drift (the flag reads as c1 left it)", s1)
	}
	p.Settle(s1)
	if _, ok := p.Expected("r:flag:beta"); ok {
		t.Error("the pass expects a state for a resource no undo touched")
	}
}

// A change of several resources is kept whole when one moved, with drift
// naming only that resource, and keeps all of them for the older changes.
func TestPass_SeveralResourcesKeptWhole(t *testing.T) {
	c := &ledger.Change{ID: "chg_2", Status: ledger.Applied, Undoable: true, Resources: []string{"row:a", "row:b"},
		Before: raw(`{"row:a":{"v":1},"row:b":{"v":1}}`), After: raw(`{"row:a":{"v":2},"row:b":{"v":2}}`)}
	older := &ledger.Change{ID: "chg_1", Status: ledger.Applied, Undoable: true, Resource: "row:a", Before: raw(`{"v":0}`), After: raw(`{"v":1}`)}
	p := NewPass(time.Unix(1000, 0), nil, voice.New("", "", voice.Token))
	s := step(c)
	p.Precheck(s)
	p.Check(s, map[string]json.RawMessage{"r:row:a": raw(`{"v":2}`), "r:row:b": raw(`{"v":9}`)}, nil, Planning)
	if s.Verdict != Skip || len(s.Drift) != 1 || s.Drift[0].Resource != "row:b" || s.Drift[0].Field != "v" {
		t.Fatalf("step = %+v, want kept with one drift entry of row:b's v", s)
	}
	p.Settle(s)
	o := step(older)
	p.Precheck(o)
	if o.Verdict != Skip {
		t.Fatalf("the older change of row:a = %+v, want kept", o)
	}
}
