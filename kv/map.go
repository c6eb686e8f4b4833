package kv

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"sync"

	"github.com/mcp-changeset/changeset-go/internal/canonjson"
)

// Map is a [Store] and a [Batcher] in memory, for tests and examples. Its
// zero value is an empty store ready to use; it is safe for concurrent use.
type Map struct {
	mu sync.Mutex
	m  map[string]json.RawMessage
}

// Get returns the value of key, or nil if there is none.
func (m *Map) Get(ctx context.Context, key string) (json.RawMessage, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.m[key], nil
}

// Swap sets key to next (nil: deletes it) if it holds prev (nil: absent);
// otherwise it returns an error wrapping ErrChanged.
func (m *Map) Swap(ctx context.Context, key string, prev, next json.RawMessage) error {
	return m.SwapAll(ctx, []Swap{{Key: key, Prev: prev, Next: next}})
}

// SwapAll applies every swap if every key holds its Prev, and otherwise
// writes nothing and returns an error wrapping ErrChanged (see Batcher).
func (m *Map) SwapAll(ctx context.Context, swaps []Swap) error {
	if err := distinctKeys(swaps); err != nil {
		return err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, s := range swaps {
		if !sameValue(m.m[s.Key], s.Prev) {
			return fmt.Errorf("kv: key %q: %w", s.Key, ErrChanged)
		}
	}
	for _, s := range swaps {
		if s.Next == nil {
			delete(m.m, s.Key)
			continue
		}
		if m.m == nil {
			m.m = map[string]json.RawMessage{}
		}
		m.m[s.Key] = append(json.RawMessage(nil), s.Next...)
	}
	return nil
}

// All returns a copy of every key and value.
func (m *Map) All(ctx context.Context) (map[string]json.RawMessage, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return maps.Clone(m.m), nil
}

// sameValue reports whether two stored values are the same: both absent,
// or equal JSON values (equal canonical forms). A value that is not valid
// JSON equals only the same bytes.
func sameValue(a, b json.RawMessage) bool {
	if a == nil || b == nil {
		return a == nil && b == nil
	}
	ca, errA := canonjson.Canonicalize(a)
	cb, errB := canonjson.Canonicalize(b)
	if errA != nil || errB != nil {
		return string(a) == string(b)
	}
	return string(ca) == string(cb)
}

// distinctKeys refuses a batch that names a key twice, whose outcome would
// depend on the order of its swaps.
func distinctKeys(swaps []Swap) error {
	seen := make(map[string]bool, len(swaps))
	for _, s := range swaps {
		if seen[s.Key] {
			return fmt.Errorf("kv: a batch of swaps names key %q twice", s.Key)
		}
		seen[s.Key] = true
	}
	return nil
}
