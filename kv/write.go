package kv

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"

	changeset "github.com/mcp-changeset/changeset-go"
	"github.com/mcp-changeset/changeset-go/internal/canonjson"
)

// write is one key's part of a change as the adapter performs it: the key
// must hold a value whose counted members (see Kind.Ignore) equal from's,
// or be absent if from is nil, and is set to to, or deleted if to is nil.
type write struct {
	key      string
	from, to json.RawMessage
	// apply is set for an apply, which writes the ignored members that to
	// sets differently from from; an undo keeps every ignored member as
	// the key holds it.
	apply bool
}

// maxAttempts bounds how often commit reads and swaps again after a swap
// lost to another writer: it succeeds again only when that writer changed
// nothing but ignored members.
const maxAttempts = 3

// commit performs the writes of one change and returns the value each key
// now holds. It reads every key and refuses with a
// *changeset.StateChangedError, writing nothing, when one of them differs
// from its write's from on a counted member. Otherwise it swaps every key
// against the exact value it read, so that a writer who came in between is
// caught by the Store: when that writer changed only ignored members the
// whole commit starts again, otherwise the commit is refused the same way.
//
// Several keys are swapped at once by a Batcher; on another Store they are
// swapped one at a time, and those already swapped are swapped back when
// one fails (see swapAll).
func (k Kind[V]) commit(ctx context.Context, ws []write) ([]json.RawMessage, error) {
	for attempt := 1; ; attempt++ {
		swaps := make([]Swap, len(ws))
		for i, w := range ws {
			cur, err := k.Store.Get(ctx, w.key)
			if err != nil {
				return nil, err
			}
			same, err := k.sameCounted(cur, w.from)
			if err != nil {
				return nil, fmt.Errorf("kv: the stored %s %q: %w", k.Name, w.key, err)
			}
			if !same {
				return nil, &changeset.StateChangedError{} // the Guard fills in the change and phase
			}
			next, err := k.target(w, cur)
			if err != nil {
				return nil, err
			}
			swaps[i] = Swap{Key: w.key, Prev: cur, Next: next}
		}
		err := swapAll(ctx, k.Store, swaps)
		var pw *PartialWriteError
		switch {
		case err == nil:
			written := make([]json.RawMessage, len(swaps))
			for i, s := range swaps {
				written[i] = s.Next
			}
			return written, nil
		case errors.As(err, &pw):
			return nil, err
		case errors.Is(err, ErrChanged) && attempt < maxAttempts:
			continue // read again: the other writer may have touched only ignored members
		case errors.Is(err, ErrChanged):
			return nil, &changeset.StateChangedError{}
		}
		return nil, err
	}
}

// swapAll swaps every key, all or none as far as the Store allows: in one
// step on a Batcher; otherwise one key at a time, swapping back the keys
// already swapped when one fails. A swap back is itself a compare-and-set
// (from the value written to the value read), so it never overwrites a
// writer who changed such a key in the meantime; a key it cannot restore
// is reported in a *PartialWriteError.
func swapAll(ctx context.Context, s Store, swaps []Swap) error {
	if b, ok := s.(Batcher); ok && len(swaps) > 1 {
		return b.SwapAll(ctx, swaps)
	}
	for i, sw := range swaps {
		err := s.Swap(ctx, sw.Key, sw.Prev, sw.Next)
		if err == nil {
			continue
		}
		// Swap back even when ctx is what failed: the keys must not stay
		// half-written because the caller went away.
		back := context.WithoutCancel(ctx)
		pw := &PartialWriteError{Err: err}
		for _, done := range slices.Backward(swaps[:i]) {
			if rerr := s.Swap(back, done.Key, done.Next, done.Prev); rerr != nil {
				pw.Keys = append(pw.Keys, done.Key)
				pw.Rollback = errors.Join(pw.Rollback, rerr)
			}
		}
		if pw.Keys != nil {
			slices.Sort(pw.Keys)
			return pw
		}
		return err
	}
	return nil
}

// PartialWriteError reports a change of several keys, on a Store that is
// not a [Batcher], that stopped part-way and could not be swapped back
// whole: the change wrote each of Keys, and someone changed it again
// before it could be set back (or the Store failed then); every other key
// of the change is as it was before. The Guard records the change as
// failed without "nothing written", for an operator to look at; the
// adapter writes nothing more. It does not match [ErrChanged], whatever
// the cause, since something was written.
type PartialWriteError struct {
	// Keys are the keys the change wrote and could not set back, sorted.
	Keys []string
	// Err is why the change stopped: usually a key that no longer held the
	// value read a moment before (wrapping ErrChanged), or the Store's
	// own failure.
	Err error
	// Rollback is why the Keys could not be set back.
	Rollback error
}

func (e *PartialWriteError) Error() string {
	return fmt.Sprintf("kv: a change of several keys stopped part-way (%v) and keys %s could not be set back (%v): the change wrote them and they changed again since; the change's other keys are as before; check these by hand",
		e.Err, strings.Join(quoteAll(e.Keys), ", "), e.Rollback)
}

func quoteAll(keys []string) []string {
	q := make([]string, len(keys))
	for i, k := range keys {
		q[i] = fmt.Sprintf("%q", k)
	}
	return q
}

// state is the state of a key as Observe and a Snapshot report it: its
// value in canonical JSON without the ignored members, or nil when the
// key is absent. Every operation of the package observes a key through it,
// so a key's state is the same bytes in every change that touches it (a
// run's undo compares them across changes).
func (k Kind[V]) state(v json.RawMessage) (any, error) {
	c, err := k.counted(v)
	if err != nil || c == nil {
		return nil, err
	}
	return c, nil
}

// observe reads key and returns its state.
func (k Kind[V]) observe(ctx context.Context, key string) (any, error) {
	v, err := k.Store.Get(ctx, key)
	if err != nil {
		return nil, err
	}
	s, err := k.state(v)
	if err != nil {
		return nil, fmt.Errorf("kv: the stored %s %q is not valid JSON: %w", k.Name, key, err)
	}
	return s, nil
}

// counted is v in canonical JSON without its ignored members; nil stays
// nil. A value that is not an object is only made canonical.
func (k Kind[V]) counted(v json.RawMessage) (json.RawMessage, error) {
	if v == nil {
		return nil, nil
	}
	c, err := canonjson.Canonicalize(v)
	if err != nil || len(k.Ignore) == 0 {
		return c, err
	}
	m, ok := members(c)
	if !ok {
		return c, nil
	}
	dropped := false
	for _, name := range k.Ignore {
		if _, in := m[name]; in {
			delete(m, name)
			dropped = true
		}
	}
	if !dropped {
		return c, nil
	}
	return canonjson.Marshal(m)
}

// sameCounted reports whether a and b hold equal counted members (both
// absent counts as equal).
func (k Kind[V]) sameCounted(a, b json.RawMessage) (bool, error) {
	if a == nil || b == nil {
		return a == nil && b == nil, nil
	}
	ca, err := k.counted(a)
	if err != nil {
		return false, err
	}
	cb, err := k.counted(b)
	if err != nil {
		return false, err
	}
	return bytes.Equal(ca, cb), nil
}

// target is the value w writes over cur, the value the key holds now: w.to
// with its ignored members taken from cur, except, for an apply, those
// that w.to sets differently from w.from. Where there is nothing to carry
// over (no Ignore, a key absent before or after, a value that is not an
// object) it is w.to itself.
func (k Kind[V]) target(w write, cur json.RawMessage) (json.RawMessage, error) {
	if w.to == nil || cur == nil || len(k.Ignore) == 0 {
		return w.to, nil
	}
	to, ok := members(w.to)
	now, ok2 := members(cur)
	if !ok || !ok2 {
		return w.to, nil
	}
	from, _ := members(w.from)
	carried := false
	for _, name := range k.Ignore {
		if w.apply && !sameMember(from, to, name) {
			continue // the change sets it itself, e.g. a stamp
		}
		if sameMember(now, to, name) {
			continue
		}
		carried = true
		if v, in := now[name]; in {
			to[name] = v
		} else {
			delete(to, name)
		}
	}
	if !carried {
		return w.to, nil
	}
	return canonjson.Marshal(to)
}

// members splits a JSON object into its members; ok is false for any other
// value.
func members(v json.RawMessage) (m map[string]json.RawMessage, ok bool) {
	if json.Unmarshal(v, &m) != nil || m == nil {
		return nil, false
	}
	return m, true
}

// sameMember reports whether a and b hold equal values under name, or
// both lack it.
func sameMember(a, b map[string]json.RawMessage, name string) bool {
	va, inA := a[name]
	vb, inB := b[name]
	if !inA || !inB {
		return inA == inB
	}
	return sameValue(va, vb)
}
