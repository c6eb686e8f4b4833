package kv

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"sync"

	"github.com/mcp-changeset/changeset-go/internal/canonjson"
)

// Map is a Store in memory, for tests and examples. Its zero value is an
// empty store ready to use; it is safe for concurrent use.
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
	m.mu.Lock()
	defer m.mu.Unlock()
	if !sameValue(m.m[key], prev) {
		return fmt.Errorf("kv: key %q: %w", key, ErrChanged)
	}
	if next == nil {
		delete(m.m, key)
		return nil
	}
	if m.m == nil {
		m.m = map[string]json.RawMessage{}
	}
	m.m[key] = append(json.RawMessage(nil), next...)
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
