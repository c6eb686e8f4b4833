package pipeline

import (
	"encoding/json"
	"errors"
	"testing"
)

// The pipeline's behaviour is tested through the Guard, with real
// operations on both ledger backends (the root package's tests); this
// file tests what needs no Guard.

// A change that names several resources must be observed as exactly
// those resources; one that names one or none may be observed as
// anything.
func TestCheckStates_SeveralResourcesNeedExactlyTheirStates(t *testing.T) {
	for _, tc := range []struct {
		resources []string
		state     string
		ok        bool
	}{
		{nil, `"anything"`, true},
		{[]string{"a", "b"}, `{"a":1,"b":null}`, true},
		{[]string{"a", "b"}, `{"a":1}`, false},             // b missing
		{[]string{"a"}, `{"a":1,"c":2}`, false},            // c not named
		{[]string{"a"}, `[1]`, false},                      // not an object
		{[]string{"a"}, `null`, false},                     // no object at all
		{[]string{}, `{}`, true},                           // names none, observed as none
		{[]string{"a", "b"}, `{"b":true,"a":false}`, true}, // order does not matter
	} {
		err := CheckStates(tc.resources, json.RawMessage(tc.state))
		if (err == nil) != tc.ok {
			t.Errorf("CheckStates(%q, %s) = %v, want ok=%v", tc.resources, tc.state, err, tc.ok)
		}
	}
}

// A refusal made inside a claim's transaction is told apart from the
// ledger's errors (which roll the transaction back), and comes out as the
// error it marks.
func TestAsRefusal_SplitsMarkedRefusalsFromLedgerErrors(t *testing.T) {
	why := errors.New("refused")
	refusal, failure := asRefusal(refused(why))
	if refusal != why || failure != nil {
		t.Errorf("a marked refusal split as (%v, %v)", refusal, failure)
	}
	busy := errors.New("database is locked")
	refusal, failure = asRefusal(busy)
	if refusal != nil || failure != busy {
		t.Errorf("a ledger error split as (%v, %v)", refusal, failure)
	}
}
