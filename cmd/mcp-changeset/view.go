package main

import (
	"encoding/json"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/mcp-changeset/changeset-go/ledger"
)

// The views below are the only shapes in which the command prints rows.
// They are built field by field from ledger rows and have no field for a
// digest: ScopeHash, PayloadHash, StateHash, ConfirmHash and UndoHash of a
// change, and ScopeHash, PlanHash and ConfirmHash of a run, are never
// copied. Their JSON field names are part of the command's contract
// (docs/cli.md); add fields, never rename them.

// jsonTime is a time in JSON output: RFC 3339 in UTC, or null for the zero
// time.
type jsonTime time.Time

// MarshalJSON implements json.Marshaler.
func (t jsonTime) MarshalJSON() ([]byte, error) {
	tt := time.Time(t)
	if tt.IsZero() {
		return []byte("null"), nil
	}
	return json.Marshal(tt.UTC().Format(time.RFC3339Nano))
}

// UnmarshalJSON implements json.Unmarshaler: it reads what MarshalJSON
// writes, so that the views can be read back.
func (t *jsonTime) UnmarshalJSON(b []byte) error {
	if string(b) == "null" {
		*t = jsonTime{}
		return nil
	}
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		return err
	}
	tt, err := time.Parse(time.RFC3339Nano, s)
	*t = jsonTime(tt)
	return err
}

// changeView is a change as list prints it.
type changeView struct {
	ChangeID      string `json:"change_id"`
	Action        string `json:"action"`
	Status        string `json:"status"`
	Summary       string `json:"summary"`
	Resource      string `json:"resource"`
	RunID         string `json:"run_id"`
	Undoable      bool   `json:"undoable"`
	Transactional bool   `json:"transactional"`
	// PreviewedBy, AppliedBy and UndoneBy name who previewed, applied
	// and undid the change: agent:NAME, person:NAME or operator:NAME.
	PreviewedBy string `json:"previewed_by"`
	AppliedBy   string `json:"applied_by"`
	UndoneBy    string `json:"undone_by"`
	ErrorType   string `json:"error_type"`
	// Failure is why a failed change failed (state_changed, error,
	// result_too_large, interrupted); NothingWritten is true where the
	// library knows the failed change wrote nothing.
	Failure        string   `json:"failure"`
	NothingWritten bool     `json:"nothing_written"`
	CreatedAt      jsonTime `json:"created_at"`
	UpdatedAt      jsonTime `json:"updated_at"`
	ExpiresAt      jsonTime `json:"expires_at"`
	AppliedAt      jsonTime `json:"applied_at"`
	UndoExpiresAt  jsonTime `json:"undo_expires_at"`
	UndoneAt       jsonTime `json:"undone_at"`
}

// changeDetail is a change as show prints it: the list view plus the
// stored values and texts an operator may read.
type changeDetail struct {
	changeView
	Warnings []string        `json:"warnings"`
	Diff     json.RawMessage `json:"diff"`
	Payload  json.RawMessage `json:"payload"`
	Result   json.RawMessage `json:"result"`
	Before   json.RawMessage `json:"before"`
	After    json.RawMessage `json:"after"`
	// UndoFound is what a refused undo's check found instead of After.
	UndoFound json.RawMessage `json:"undo_found"`
	Error     string          `json:"error"`
	Note      string          `json:"note"`
	// DependsOn names the resources the change relies on.
	DependsOn []string `json:"depends_on"`
	// Resources names every resource of a change that names several;
	// empty for one that names one (in resource) or none.
	Resources []string `json:"resources"`
	// RedactFields are the payload fields the operation marked sensitive;
	// once RedactedAt is set their stored values are keyed hashes, shown
	// as "[redacted]".
	RedactFields []string `json:"redact_fields"`
	RedactedAt   jsonTime `json:"redacted_at"`
	// History is every transition of the change, oldest first.
	History []historyView `json:"history"`
}

// runView is a run as runs prints it.
type runView struct {
	RunID           string         `json:"run_id"`
	Label           string         `json:"label"`
	Status          string         `json:"status"`
	UndoneBy        string         `json:"undone_by"`
	CreatedAt       jsonTime       `json:"created_at"`
	UpdatedAt       jsonTime       `json:"updated_at"`
	ChangeCount     int            `json:"change_count"`
	ChangesByStatus map[string]int `json:"changes_by_status"`
}

func viewChange(c *ledger.Change) changeView {
	return changeView{
		ChangeID:       c.ID,
		Action:         c.Action,
		Status:         string(c.Status),
		Summary:        c.Summary,
		Resource:       c.Resource,
		RunID:          c.RunID,
		Undoable:       c.Undoable,
		Transactional:  c.Transactional,
		PreviewedBy:    c.PreviewedBy,
		AppliedBy:      c.AppliedBy,
		UndoneBy:       c.UndoneBy,
		ErrorType:      c.ErrorType,
		Failure:        string(c.Failure),
		NothingWritten: c.NothingWritten,
		CreatedAt:      jsonTime(c.CreatedAt),
		UpdatedAt:      jsonTime(c.UpdatedAt),
		ExpiresAt:      jsonTime(c.ExpiresAt),
		AppliedAt:      jsonTime(c.AppliedAt),
		UndoExpiresAt:  jsonTime(c.UndoExpiresAt),
		UndoneAt:       jsonTime(c.UndoneAt),
	}
}

func viewChangeDetail(c *ledger.Change, history []ledger.HistoryEntry) changeDetail {
	d := changeDetail{
		changeView: viewChange(c),
		Warnings:   append([]string{}, c.Warnings...),
		DependsOn:  append([]string{}, c.DependsOn...),
		Resources:  append([]string{}, c.Resources...),
		Diff:       ledger.MaskRedacted(orNull(c.Diff)),
		Payload:    ledger.MaskRedacted(orNull(c.Payload)),
		Result:     orNull(c.Result),
		Before:     orNull(c.Before),
		After:      orNull(c.After),
		UndoFound:  orNull(c.UndoFound),
		Error:      c.Error,
		Note:       c.Note,

		RedactFields: append([]string{}, c.RedactFields...),
		RedactedAt:   jsonTime(c.RedactedAt),
		History:      []historyView{},
	}
	for _, e := range history {
		d.History = append(d.History, viewHistory(e))
	}
	if len(c.Diff) == 0 {
		d.Diff = json.RawMessage("[]")
	}
	return d
}

// viewRun builds the view of r from the tallies of its changes.
func viewRun(r *ledger.Run, tallies []ledger.Tally) runView {
	v := runView{
		RunID:           r.ID,
		Label:           r.Label,
		Status:          string(r.Status),
		UndoneBy:        r.UndoneBy,
		CreatedAt:       jsonTime(r.CreatedAt),
		UpdatedAt:       jsonTime(r.UpdatedAt),
		ChangesByStatus: map[string]int{},
	}
	for _, t := range tallies {
		v.ChangesByStatus[string(t.Status)] += t.N
		v.ChangeCount += t.N
	}
	return v
}

// orNull returns raw, or the JSON null for a missing value.
func orNull(raw json.RawMessage) json.RawMessage {
	if len(raw) == 0 {
		return json.RawMessage("null")
	}
	return raw
}

// statusCounts renders counts by status in the order a change passes
// through them: "2 applied, 1 undone".
func statusCounts(counts map[string]int) string {
	order := map[string]int{}
	for i, s := range ledger.Statuses {
		order[string(s)] = i
	}
	keys := make([]string, 0, len(counts))
	for k := range counts {
		keys = append(keys, k)
	}
	rank := func(k string) int {
		if i, ok := order[k]; ok {
			return i
		}
		return len(order) // an unknown status, last
	}
	sort.Slice(keys, func(i, j int) bool {
		if rank(keys[i]) != rank(keys[j]) {
			return rank(keys[i]) < rank(keys[j])
		}
		return keys[i] < keys[j]
	})
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = strconv.Itoa(counts[k]) + " " + k
	}
	return strings.Join(parts, ", ")
}
