package ledger

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"github.com/mcp-changeset/changeset-go/internal/canonjson"
)

// Redaction. An operation may mark payload fields as sensitive (the
// changeset package reads a `changeset:"redact"` struct tag). The ledger
// needs the clear value while the change can still be applied or undone;
// once the change is terminal it replaces each marked field's value, in the
// payload and in the diff entries of that field, by
//
//	"redacted:hmac-sha256:<hex>"
//
// a keyed hash under a random key kept in the meta table. Operators can no
// longer read the value, but can still tell whether two redacted values
// were equal. Applied changes keep their values until they are undone,
// fail, or are pruned, because the undo needs them. Before and after
// snapshots, results and error texts are not redacted: keep secrets out of
// Observe and of what Apply returns.

// RedactedPrefix starts every redacted value.
const RedactedPrefix = "redacted:hmac-sha256:"

// redactKeyMeta is the meta key of the redaction key.
const redactKeyMeta = "changeset.redact_key.v1"

// redact replaces c's RedactFields and records when: at the time of the
// transition that made c terminal (c.UpdatedAt, the caller's time), or by
// the ledger's clock when c carries no time.
func (l *Ledger) redact(tx *Tx, c *Change) error {
	key, err := l.redactionKey(tx)
	if err != nil {
		return err
	}
	if err := RedactChange(c, key); err != nil {
		return fmt.Errorf("redact change %s: %w", c.ID, err)
	}
	c.RedactedAt = c.UpdatedAt
	if c.RedactedAt.IsZero() {
		c.RedactedAt = l.now()
	}
	return nil
}

// redactionKey loads the ledger's redaction key, creating it on first use.
func (l *Ledger) redactionKey(tx *Tx) ([]byte, error) {
	l.redactMu.Lock()
	defer l.redactMu.Unlock()
	if l.redactKey != nil {
		return l.redactKey, nil
	}
	fresh := make([]byte, 32)
	if _, err := rand.Read(fresh); err != nil {
		return nil, err
	}
	key, err := tx.b.SetMetaIfAbsent(tx.ctx, tx.tx, redactKeyMeta, fresh)
	if err != nil {
		return nil, err
	}
	l.redactKey = key
	return key, nil
}

// RedactChange replaces the values of c.RedactFields in c.Payload (a JSON
// object) and in c.Diff's entries for those fields by keyed hashes under
// key. Values that are already redacted, and fields that are absent, are
// left alone.
func RedactChange(c *Change, key []byte) error {
	hash := func(v json.RawMessage) (json.RawMessage, error) {
		var s string
		if json.Unmarshal(v, &s) == nil && strings.HasPrefix(s, RedactedPrefix) {
			return v, nil
		}
		m := hmac.New(sha256.New, key)
		m.Write(v)
		return json.Marshal(RedactedPrefix + hex.EncodeToString(m.Sum(nil)))
	}
	if len(c.Payload) > 0 && c.Payload[0] == '{' {
		var fields map[string]json.RawMessage
		if err := json.Unmarshal(c.Payload, &fields); err != nil {
			return err
		}
		for _, f := range c.RedactFields {
			if v, ok := fields[f]; ok {
				h, err := hash(v)
				if err != nil {
					return err
				}
				fields[f] = h
			}
		}
		b, err := canonjson.Marshal(fields)
		if err != nil {
			return err
		}
		c.Payload = b
	}
	if len(c.Diff) > 0 {
		var entries []map[string]json.RawMessage
		if err := json.Unmarshal(c.Diff, &entries); err != nil {
			return err
		}
		for _, e := range entries {
			var field string
			if json.Unmarshal(e["field"], &field) != nil || !slices.Contains(c.RedactFields, field) {
				continue
			}
			for _, side := range []string{"before", "after"} {
				if v, ok := e[side]; ok && string(v) != "null" {
					h, err := hash(v)
					if err != nil {
						return err
					}
					e[side] = h
				}
			}
		}
		b, err := canonjson.Marshal(entries)
		if err != nil {
			return err
		}
		c.Diff = b
	}
	return nil
}

// RedactedMark is what MaskRedacted shows in place of a redacted value.
const RedactedMark = "[redacted]"

// MaskRedacted returns raw with every string that holds a redacted value's
// keyed hash replaced by RedactedMark. Programs that show stored payloads
// and diffs to people (the operator CLI, the dashboard) use it: the keyed
// hash is a stored digest, which they never print.
func MaskRedacted(raw json.RawMessage) json.RawMessage {
	if !strings.Contains(string(raw), RedactedPrefix) {
		return raw
	}
	var v any
	if err := json.Unmarshal(raw, &v); err != nil {
		return raw
	}
	var walk func(any) any
	walk = func(v any) any {
		switch x := v.(type) {
		case string:
			if strings.HasPrefix(x, RedactedPrefix) {
				return RedactedMark
			}
		case []any:
			for i := range x {
				x[i] = walk(x[i])
			}
		case map[string]any:
			for k := range x {
				x[k] = walk(x[k])
			}
		}
		return v
	}
	b, err := json.Marshal(walk(v))
	if err != nil {
		return raw
	}
	return b
}
