package changeset

import (
	"encoding/json"
	"reflect"

	"github.com/mcp-changeset/changeset-go/internal/canonjson"
	"github.com/mcp-changeset/changeset-go/internal/members"
)

// Proposal is what a Preview returns: the exact payload that Apply will
// receive, and what the agent and the user are shown about it.
type Proposal[P any] struct {
	// Payload is stored in the ledger in canonical JSON. Apply, Undo and
	// Observe receive it decoded from there, never from the agent's call.
	//
	// A field of P tagged `changeset:"redact"` holds a secret the
	// operation needs for Apply and Undo but operators should not read
	// later: once the change is terminal the ledger replaces its value (and
	// the diff entry of the same name) by a keyed hash (see
	// ledger.RedactChange).
	//
	//	type payload struct {
	//		User     string `json:"user"`
	//		Password string `json:"password" changeset:"redact"`
	//	}
	Payload P
	// Diff shows the change field by field; DiffFields builds it from two
	// maps.
	Diff []DiffEntry
	// Summary is one line for people, e.g. "Set theme to dark".
	Summary string
	// Warnings say what cannot be undone exactly, e.g. "history recorded
	// before this change cannot be restored". They are shown with the
	// preview and reported again by a run's undo.
	Warnings []string
	// Resource names the thing the change touches, e.g. "note:todo.txt",
	// so that a run's undo can relate changes to the same thing. Leave it
	// empty when each change stands alone.
	Resource string
	// Resources names every resource of a change that touches several,
	// such as a price rise written to every product of a category: one
	// change, one resource per row ("product:TEA-1", "product:TEA-2", …).
	// Set Resource or Resources, not both. Observe must then return a
	// States with the state of each named resource, and so must
	// Snapshot.Value. A run's undo undoes such a change only when every
	// one of its resources is as the change left it; otherwise it keeps
	// the whole change and names each resource that moved.
	Resources []string
	// DependsOn names resources this change relies on without changing
	// them, in the same naming as Resource: a funnel that uses the rule
	// "rule:42" depends on it. A run's undo does not remove a resource
	// that a change it keeps depends on (a change people kept, or one
	// outside the run); it skips that undo and says why.
	DependsOn []string
	// Snapshot, when set, is the state the Preview read to compute this
	// proposal, as Observe would return it. The Guard then binds the change
	// to it instead of calling Observe after the Preview, which closes the
	// window in which a person's edit between the two reads would be bound
	// as "expected" and silently overwritten. A Snapshot whose Value is nil
	// stands for a resource that does not exist.
	Snapshot *Snapshot
}

// Snapshot carries an observed state; see Proposal.Snapshot.
type Snapshot struct {
	Value any
}

// States is what Observe returns for a change that names several
// resources (Proposal.Resources): the state of each, by resource name,
// with nil for a resource that does not exist. Its keys must be exactly
// the proposal's Resources.
type States map[string]any

// DiffEntry is one changed field: what an operation's Preview writes in
// [Proposal].Diff, and what a preview's result and a change's status carry
// back to the agent ([PreviewResult].Diff, [ChangeStatus].Diff) in the
// JSON form {field, kind, before, after}.
//
// Field is the bare field name ("theme", not a path), or "" when the whole
// value is compared (see [Diff]). Kind says whether the field was added
// (Before is nil), removed (After is nil) or changed; left empty in a
// Proposal, it is inferred from which side is nil. Before and After must
// be plain JSON values. In a result, and in an entry decoded from JSON
// (see [DiffEntry.UnmarshalJSON]), they hold [encoding/json.RawMessage]:
// the values' exact JSON text, null for the side an added or removed
// field lacks. Print them with %s.
type DiffEntry struct {
	Field  string   `json:"field"`
	Kind   DiffKind `json:"kind,omitempty"`
	Before any      `json:"before"`
	After  any      `json:"after"`
}

// UnmarshalJSON decodes an entry as a result carries it, keeping Before
// and After as json.RawMessage (a side missing from the JSON stays nil):
// decoded into an any, a number would become a float64 and an integer
// beyond 2^53 would be rounded.
func (e *DiffEntry) UnmarshalJSON(data []byte) error {
	if string(data) == "null" {
		return nil // as encoding/json treats null for any other struct
	}
	var raw struct {
		Field  string          `json:"field"`
		Kind   DiffKind        `json:"kind"`
		Before json.RawMessage `json:"before"`
		After  json.RawMessage `json:"after"`
	}
	if err := json.Unmarshal(data, &raw); err != nil {
		return err
	}
	*e = DiffEntry{Field: raw.Field, Kind: raw.Kind}
	if raw.Before != nil {
		e.Before = raw.Before
	}
	if raw.After != nil {
		e.After = raw.After
	}
	return nil
}

// DiffFields compares two flat maps and returns an entry for every key whose
// value differs, sorted by key. A key missing from before (or a nil map) is
// added, one missing from after removed. Values are compared as JSON, so 1
// and 1.0 are equal. Diff does the same for values of any type.
func DiffFields(before, after map[string]any) []DiffEntry {
	return diffMembers(before, after, sameJSON)
}

// diffMembers compares the members of two objects, sorted by name, with
// same deciding whether two values are equal.
func diffMembers[V any](before, after map[string]V, same func(a, b V) bool) []DiffEntry {
	diff := []DiffEntry{}
	members.Diff(before, after, same, func(name, kind string, b, a V) {
		e := DiffEntry{Field: name, Kind: DiffKind(kind)}
		if kind != members.Added {
			e.Before = b
		}
		if kind != members.Removed {
			e.After = a
		}
		diff = append(diff, e)
	})
	return diff
}

// sameJSON reports whether a and b encode to equal JSON values: equal
// canonical forms, so that 1 and 1.0 are equal and integers are compared
// exactly, however large.
func sameJSON(a, b any) bool {
	ja, errA := canonjson.Marshal(a)
	jb, errB := canonjson.Marshal(b)
	if errA != nil || errB != nil {
		return reflect.DeepEqual(a, b)
	}
	return string(ja) == string(jb)
}
