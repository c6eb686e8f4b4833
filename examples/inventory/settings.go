// The store settings' tools: set_store_setting, a guarded operation on a
// JSON file, and the read tool get_store_settings.
//
// The file holds the settings someone set, by key; a key it does not hold
// has its default value. The adapter kv offers create and update, but a
// setting is either: the first set_store_setting of a key creates it, a
// later one changes it. So the operation is written here in full on the
// file's kv.JSONFile, which gives the compare-and-set: Apply sets the key
// only if it still holds the value the preview saw (or is still absent),
// and Undo puts that value back (or removes the key, and with it returns
// to the default) only if the key still holds the value the apply wrote.

package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"unicode"

	changeset "github.com/mcp-changeset/changeset-go"
	"github.com/mcp-changeset/changeset-go/kv"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// setting is one store setting: its default, the text that says what it
// takes, and the check of a value.
type setting struct {
	def   any
	takes string
	check func(v any) bool
}

var validCurrency = regexp.MustCompile(`^[A-Z]{3}$`)

// settings are the store settings the server knows, by key.
var settings = map[string]setting{
	"currency": {
		def:   "USD",
		takes: "a three-letter ISO 4217 code in upper case, e.g. \"EUR\"",
		check: func(v any) bool { s, ok := v.(string); return ok && validCurrency.MatchString(s) },
	},
	"tax_rate": {
		def:   0.0,
		takes: "a number from 0 to 1, e.g. 0.2 for 20%",
		check: func(v any) bool { f, ok := v.(float64); return ok && f >= 0 && f <= 1 && !math.IsNaN(f) },
	},
	"store_name": {
		def:   "My store",
		takes: "a name of 1 to 100 characters, not blank, without control characters",
		check: func(v any) bool {
			s, ok := v.(string)
			return ok && strings.TrimSpace(s) != "" && len([]rune(s)) <= 100 && strings.IndexFunc(s, unicode.IsControl) < 0
		},
	},
}

// The tool's input and get_store_settings' output.
type (
	setSettingIn struct {
		Key   string          `json:"key" jsonschema:"the setting: currency, tax_rate or store_name"`
		Value json.RawMessage `json:"value" jsonschema:"the new value: currency a code such as \"EUR\"; tax_rate a number from 0 to 1; store_name a string"`
	}
	storeSettings struct {
		Currency  string  `json:"currency" jsonschema:"the store's currency, an ISO 4217 code"`
		TaxRate   float64 `json:"tax_rate" jsonschema:"the tax rate, from 0 to 1"`
		StoreName string  `json:"store_name" jsonschema:"the store's name"`
	}
	settingsOut struct {
		Settings storeSettings `json:"settings" jsonschema:"every store setting, with its default value where none was set"`
	}
)

// settingChange is the payload of set_store_setting: the key and its value
// in the file before and after, as canonical JSON. Before is absent when
// the file did not hold the key (it had its default).
type settingChange struct {
	Key    string          `json:"key"`
	Before json.RawMessage `json:"before,omitempty"`
	After  json.RawMessage `json:"after"`
}

// settingSet is what an apply returns: the key and its new value.
type settingSet struct {
	Key   string          `json:"key"`
	Value json.RawMessage `json:"value"`
}

// registerSettings adds set_store_setting and get_store_settings.
func registerSettings(server *mcp.Server, guard *changeset.Guard, file *kv.JSONFile, log *slog.Logger) {
	preview := func(ctx context.Context, in setSettingIn) (*changeset.Proposal[settingChange], error) {
		after, err := checkSetting(in.Key, in.Value)
		if err != nil {
			return nil, err
		}
		before, err := file.Get(ctx, in.Key)
		if err != nil {
			return nil, err
		}
		cur := settings[in.Key].def
		if before != nil {
			if err := json.Unmarshal(before, &cur); err != nil {
				return nil, fmt.Errorf("the setting %s in the file: %w", in.Key, err)
			}
		}
		if sameJSON(cur, after) {
			return nil, changeset.Refuse("the setting %s already holds this value; nothing would change", in.Key)
		}
		afterJSON, err := json.Marshal(after)
		if err != nil {
			return nil, err
		}
		return &changeset.Proposal[settingChange]{
			Payload:  settingChange{Key: in.Key, Before: before, After: afterJSON},
			Diff:     changeset.DiffFields(map[string]any{in.Key: cur}, map[string]any{in.Key: after}),
			Summary:  "Set store setting " + in.Key,
			Resource: "setting:" + in.Key,
			Snapshot: &changeset.Snapshot{Value: rawState(before)},
		}, nil
	}
	apply := func(ctx context.Context, c settingChange) (settingSet, error) {
		return settingSet{Key: c.Key, Value: c.After}, swap(ctx, file, c.Key, c.Before, c.After)
	}
	op := changeset.Operation[setSettingIn, settingChange, settingSet]{
		Preview: preview,
		Apply:   apply,
		Undo: func(ctx context.Context, c settingChange, _ settingSet) error {
			return swap(ctx, file, c.Key, c.After, c.Before)
		},
		Observe: func(ctx context.Context, c settingChange) (any, error) {
			v, err := file.Get(ctx, c.Key)
			return rawState(v), err
		},
	}
	changeset.Register(guard, &mcp.Tool{Name: "set_store_setting", Description: "Set one store setting: currency, tax_rate or store_name."}, op)

	mcp.AddTool(server, &mcp.Tool{Name: "get_store_settings", Description: "Read the store settings, defaults included.", Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true}},
		func(ctx context.Context, _ *mcp.CallToolRequest, _ struct{}) (*mcp.CallToolResult, settingsOut, error) {
			all, err := file.All(ctx)
			if err != nil {
				log.Error("get_store_settings", "err", err)
				return nil, settingsOut{}, errors.New("the settings file cannot be read (the server's log says why)")
			}
			merged := map[string]any{}
			for key, s := range settings {
				merged[key] = s.def
				if v, ok := all[key]; ok {
					merged[key] = v
				}
			}
			b, err := json.Marshal(merged)
			if err != nil {
				return nil, settingsOut{}, err
			}
			var out settingsOut
			if err := json.Unmarshal(b, &out.Settings); err != nil {
				return nil, settingsOut{}, fmt.Errorf("the settings file holds a value of the wrong type (%v); set it again or fix the file by hand", err)
			}
			return nil, out, nil
		})
}

// checkSetting refuses an unknown key and a value the key does not take,
// and returns the value decoded.
func checkSetting(key string, raw json.RawMessage) (any, error) {
	s, ok := settings[key]
	if !ok {
		keys := make([]string, 0, len(settings))
		for k := range settings {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		return nil, changeset.Refuse("there is no store setting %s; the settings are %s", strconv.Quote(key), strings.Join(keys, ", "))
	}
	var v any
	if err := json.Unmarshal(raw, &v); err != nil || !s.check(v) {
		return nil, changeset.Refuse("%s takes %s, not %s", key, s.takes, brief(raw))
	}
	return v, nil
}

// brief is a value as the agent wrote it, cut to a readable length and
// quoted as a JSON string so that it reads as data.
func brief(raw json.RawMessage) string {
	s := string(raw)
	if r := []rune(s); len(r) > 60 {
		s = string(r[:60]) + "…"
	}
	b, _ := json.Marshal(s)
	return string(b)
}

// swap is the file's compare-and-set, with kv.ErrChanged reported as the
// Guard's state change: nothing was written, and a run's undo shows the
// change as kept with its drift.
func swap(ctx context.Context, file *kv.JSONFile, key string, prev, next json.RawMessage) error {
	err := file.Swap(ctx, key, prev, next)
	if errors.Is(err, kv.ErrChanged) {
		return &changeset.StateChangedError{} // the Guard fills in the change and phase
	}
	return err
}

// rawState is a key's value in the file as Observe and a Snapshot give it:
// nil for a key the file does not hold.
func rawState(v json.RawMessage) any {
	if v == nil {
		return nil
	}
	return v
}

// sameJSON reports whether a and b encode to the same JSON.
func sameJSON(a, b any) bool {
	ja, errA := json.Marshal(a)
	jb, errB := json.Marshal(b)
	return errA == nil && errB == nil && string(ja) == string(jb)
}
