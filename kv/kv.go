// Package kv registers guarded operations for values kept under string
// keys: feature flags in a JSON file, store settings, anything a [Store]
// can read and compare-and-set. [Create], [Update] and [Delete] change one
// key; [SetMany] sets several keys in one change.
//
// The library writes what every such server otherwise writes by hand. Each
// change stores the whole value of each key before and after it, so:
//
//   - the preview's diff is [changeset.Diff] of the two, field by field
//     (for [SetMany], key by key);
//   - Apply sets each key to its after value only if it still holds its
//     before value ([Store.Swap]), and Undo does the reverse, so neither
//     overwrites an edit made in between;
//   - Observe reads the key, and the preview's own read is the change's
//     snapshot, so an edit between the preview and the apply is refused;
//   - the resource is "<kind>:<key>" (e.g. "flag:beta"), one per key of a
//     [SetMany] change, which lets a run's undo relate the changes of one
//     key; every operation observes a key through the same function, so
//     its state is the same bytes in every change;
//   - undoing a delete writes back the deleted value exactly, fields the
//     program's type does not know included.
//
// Create refuses a key that exists, Update and Delete one that does not,
// and Update and SetMany refuse a change that changes nothing:
//
//	flags := kv.Kind[Flag]{Name: "flag", Store: kv.NewJSONFile("flags.json")}
//	kv.Create(guard, &mcp.Tool{Name: "create_flag"}, flags,
//		func(ctx context.Context, in CreateIn) (string, Flag, error) {
//			return in.Name, Flag{Enabled: in.Enabled}, nil
//		})
//	kv.Delete(guard, &mcp.Tool{Name: "delete_flag"}, flags, func(in NameIn) string { return in.Name })
//
// Members that are nobody's work, such as an "updated_at" the application
// stamps, are named in [Kind.Ignore]: they stay out of diffs and of every
// state check, and a write keeps what others put there (see [Kind.Ignore]
// for exactly what each write does with them).
//
// A change of several keys is all or nothing: on a [Batcher] (such as
// [JSONFile] and [Map]) every key is swapped in one step; on another Store
// the keys already swapped are swapped back when one fails (see [SetMany]
// for what is guaranteed).
//
// Values travel as JSON: a Store keeps each one as a JSON text, which the
// adapter compares in canonical form (so whitespace and member order do not
// count as a change). An Apply is at most once, as for any
// [changeset.Operation] whose resource lives outside the ledger.
package kv

import (
	"context"
	"encoding/json"
	"errors"
)

// ErrChanged is what [Store.Swap] and [Batcher.SwapAll] return (wrapped or
// not) when a key does not hold the value the caller expected. The adapter
// reports it as a change refused because the state changed
// ([changeset.StateChangedError]), with nothing written.
var ErrChanged = errors.New("kv: the key no longer holds the expected value")

// Store holds JSON values under string keys. A nil json.RawMessage stands
// for a key that does not exist, in both directions; a stored value is
// never nil (JSON null is the four bytes "null").
type Store interface {
	// Get returns the value of key, or nil if there is none.
	Get(ctx context.Context, key string) (json.RawMessage, error)
	// Swap sets key to next (nil: deletes it) only if it holds prev
	// (nil: the key is absent), comparing them as JSON values, atomically
	// with respect to every other writer that uses Swap. Otherwise it
	// writes nothing and returns an error wrapping ErrChanged.
	Swap(ctx context.Context, key string, prev, next json.RawMessage) error
}

// Batcher is a [Store] that can compare-and-set several keys in one step:
// all of them or none. The adapter uses it, when the Store has it, to make
// a change of several keys ([SetMany], and its undo) atomic; [JSONFile] and
// [Map] have it. Without it the adapter swaps the keys one at a time and
// swaps them back when one of them fails (see [SetMany]).
type Batcher interface {
	Store
	// SwapAll applies every swap, each as [Store.Swap] would, only if every
	// key holds its Prev; otherwise it writes nothing and returns an error
	// wrapping ErrChanged. A key appears at most once.
	SwapAll(ctx context.Context, swaps []Swap) error
}

// Swap is one key's part of [Batcher.SwapAll]: set Key to Next (nil: delete
// it) if it holds Prev (nil: the key is absent).
type Swap struct {
	Key        string
	Prev, Next json.RawMessage
}

// Kind names one kind of value in a [Store] and the Go type V it decodes
// to. Every operation of the package takes one.
type Kind[V any] struct {
	// Name appears in resources ("flag:beta"), summaries ("Create flag
	// beta") and refusals ("there is no flag \"beta\"").
	Name string
	// Store holds the values; a [Batcher] makes a change of several keys
	// one step.
	Store Store
	// Ignore names top-level members of a value's JSON object that do not
	// count as anyone's work, such as an "updated_at" the application
	// stamps or a position in a list: they are left out of diffs, of
	// Observe (so an edit of them neither blocks an apply nor an undo) and
	// of the comparison before every write. A write still swaps against
	// the exact value it read, ignored members included, so a writer who
	// comes in between is caught by the Store; when that writer changed
	// only ignored members, the write reads the key again and retries (a
	// few times at most), since nothing that counts moved.
	//
	// What a write does with them: an apply writes an ignored member only
	// when the change itself sets it (its value differs from the one the
	// preview read, as when an Update's function stamps "updated_at");
	// every other ignored member keeps the value the key holds at the
	// time of the write. An undo writes back the counted members of the
	// value before the change and keeps every ignored member as the key
	// holds it then, so an undo never moves a position someone changed
	// since. When the key is absent (a create, the undo of a delete) the
	// whole value is written, ignored members included. [SetMany] keeps
	// the ignored members of a key that exists, whatever its function
	// returns for them. Values that are not JSON objects have nothing to
	// ignore.
	Ignore []string
}
