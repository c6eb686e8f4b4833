package sqlval

import (
	"database/sql"
	"strings"
	"time"

	"github.com/mcp-changeset/changeset-go/ledger"
)

// Where is a WHERE clause built condition by condition, with its
// arguments numbered in the order they were added. The filters of both
// backends are built here, once, in the backend's Dialect.
type Where struct {
	d     Dialect
	conds []string
	// Args are the arguments of every placeholder added so far.
	Args []any
}

// NewWhere starts an empty clause in dialect d.
func NewWhere(d Dialect) *Where { return &Where{d: d} }

// Arg adds an argument and returns its placeholder.
func (w *Where) Arg(v any) string {
	w.Args = append(w.Args, v)
	return w.d.Param(len(w.Args))
}

// Cond adds a condition, which the caller built with Arg.
func (w *Where) Cond(cond string) { w.conds = append(w.conds, cond) }

// In adds "column is one of values".
func (w *Where) In(column string, values []string) { w.Cond(w.anyOf(column, values)) }

// openStatuses are the statuses of changes_open, the partial index of
// SQLite ledgers, spelled as the index's own WHERE spells them.
var openStatuses = map[ledger.Status]string{
	ledger.Pending:     "status = 'pending'",
	ledger.Applying:    "status = 'applying'",
	ledger.Undoing:     "status = 'undoing'",
	ledger.ApplyFailed: "status = 'apply_failed'",
	ledger.UndoFailed:  "status = 'undo_failed'",
}

// statusIn adds "status is one of statuses". On a dialect with
// OpenIndex, statuses that all lie in changes_open are written as
// literals, "(status = 'pending' OR …)": SQLite reads a partial index only
// for a condition it can match against a branch of the index's WHERE, and
// a bound parameter it matches only by re-preparing the statement on
// every call. The literals come from openStatuses, never from the filter.
func (w *Where) statusIn(statuses []ledger.Status) {
	if w.d.OpenIndex {
		ors := make([]string, 0, len(statuses))
		for _, s := range statuses {
			lit, ok := openStatuses[s]
			if !ok {
				ors = nil
				break
			}
			ors = append(ors, lit)
		}
		if ors != nil {
			w.Cond("(" + strings.Join(ors, " OR ") + ")")
			return
		}
	}
	w.In("status", strs(statuses))
}

// anyOf is the condition "column is one of values", its arguments added.
func (w *Where) anyOf(column string, values []string) string {
	if w.d.ArrayParam {
		return column + " = ANY(" + w.Arg(values) + ")"
	}
	ps := make([]string, len(values))
	for i, v := range values {
		ps[i] = w.Arg(v)
	}
	return column + " IN (" + strings.Join(ps, ", ") + ")"
}

// String is " WHERE a AND b …", or "" without conditions.
func (w *Where) String() string {
	if len(w.conds) == 0 {
		return ""
	}
	return " WHERE " + strings.Join(w.conds, " AND ")
}

// Limit is " LIMIT n" for n > 0 (its argument added last), or "".
func (w *Where) Limit(n int) string {
	if n <= 0 {
		return ""
	}
	return " LIMIT " + w.Arg(n)
}

// NewestFirst is the order of every list of changes and runs: by creation
// time, then by ID (byte by byte), descending. ChangeKey paging depends on
// it.
const NewestFirst = " ORDER BY created_at DESC, id DESC"

// ChangeWhere is the clause that selects the changes f selects, except for
// its Limit. paged says whether to apply f.Before (CountChanges does not).
// deps names the change_deps table as the backend's SQL must spell it.
func ChangeWhere(d Dialect, f ledger.ChangeFilter, deps string, paged bool) *Where {
	w := NewWhere(d)
	if len(f.Statuses) > 0 {
		w.statusIn(f.Statuses)
	}
	if f.RunID != "" {
		w.Cond("run_id = " + w.Arg(f.RunID))
	}
	if f.ScopeHash != "" {
		w.Cond("scope_hash = " + w.Arg(f.ScopeHash))
	}
	if !f.ExpiresAfter.IsZero() {
		w.Cond("expires_at > " + w.Arg(f.ExpiresAfter.UnixMicro()))
	}
	if !f.UpdatedBefore.IsZero() {
		w.Cond("updated_at < " + w.Arg(CeilMicro(f.UpdatedBefore)))
	}
	if !f.UpdatedSince.IsZero() {
		w.Cond("updated_at >= " + w.Arg(CeilMicro(f.UpdatedSince)))
	}
	if f.Action != "" {
		w.Cond("action = " + w.Arg(f.Action))
	}
	if f.Text != "" {
		pattern := "%" + likeEscape(strings.ToLower(f.Text)) + "%"
		var ors []string
		for _, col := range []string{"summary", "action", "resource"} {
			ors = append(ors, "LOWER("+col+") LIKE "+w.Arg(pattern)+` ESCAPE '\'`)
		}
		w.Cond("(" + strings.Join(ors, " OR ") + ")")
	}
	if f.DependsOn != "" {
		w.Cond("id IN (SELECT change_id FROM " + deps + " WHERE resource = " + w.Arg(f.DependsOn) + ")")
	}
	if len(f.DependsOnAny) > 0 {
		w.Cond("id IN (SELECT change_id FROM " + deps + " WHERE " + w.anyOf("resource", f.DependsOnAny) + ")")
	}
	if f.By != "" {
		w.Cond("(previewed_by = " + w.Arg(f.By) + " OR applied_by = " + w.Arg(f.By) + " OR undone_by = " + w.Arg(f.By) + ")")
	}
	if paged && f.Before != nil {
		w.after(f.Before.CreatedAt, f.Before.ID)
	}
	return w
}

// after selects the rows that come strictly after the key (created, id)
// in NewestFirst order: created earlier, or in the same microsecond with a
// smaller ID. A key time with nanoseconds (never one read from a ledger)
// lies between two stored microseconds: every row of the earlier one, and
// before, comes after it.
func (w *Where) after(created time.Time, id string) {
	us := created.UnixMicro()
	if time.UnixMicro(us).Equal(created) {
		// A row value, which both databases match against an index on
		// (…, created_at, id): a page costs its own rows, not the rows
		// of the pages before it.
		w.Cond("(created_at, id) < (" + w.Arg(us) + ", " + w.Arg(id) + ")")
		return
	}
	w.Cond("created_at < " + w.Arg(CeilMicro(created)))
}

// RunWhere is the clause that selects the runs f selects, except for its
// Limit.
func RunWhere(d Dialect, f ledger.RunFilter) *Where {
	w := NewWhere(d)
	if len(f.Statuses) > 0 {
		w.In("status", strs(f.Statuses))
	}
	if f.ScopeHash != "" {
		w.Cond("scope_hash = " + w.Arg(f.ScopeHash))
	}
	if f.Kind != "" {
		w.Cond("kind = " + w.Arg(string(f.Kind)))
	}
	if f.SessionKey != "" {
		w.Cond("session_key = " + w.Arg(f.SessionKey))
	}
	if !f.UpdatedBefore.IsZero() {
		w.Cond("updated_at < " + w.Arg(CeilMicro(f.UpdatedBefore)))
	}
	if !f.UpdatedSince.IsZero() {
		w.Cond("updated_at >= " + w.Arg(CeilMicro(f.UpdatedSince)))
	}
	if f.Before != nil {
		w.after(f.Before.CreatedAt, f.Before.ID)
	}
	return w
}

// likeEscape escapes LIKE's wildcards and its escape character, so that
// a search matches its text literally.
func likeEscape(s string) string {
	return strings.NewReplacer(`\`, `\\`, "%", `\%`, "_", `\_`).Replace(s)
}

// strs converts statuses to strings.
func strs[S ~string](s []S) []string {
	out := make([]string, len(s))
	for i, v := range s {
		out[i] = string(v)
	}
	return out
}

// HistoryColumns are the columns of the history table that an append
// writes, in the order of HistoryArgs; seq is the database's.
const HistoryColumns = "at, change_id, run_id, from_status, to_status, actor, note, approval_id"

// HistorySelect are the columns ScanHistory reads.
const HistorySelect = "seq, " + HistoryColumns

// HistoryArgs binds e to HistoryColumns.
func HistoryArgs(e ledger.HistoryEntry) []any {
	return []any{TimeArg(e.At), OptString(e.ChangeID), OptString(e.RunID), e.From, e.To, e.By, e.Note, OptString(e.ApprovalID)}
}

// HistorySubject names what an entry is about, for messages: a change, a
// run, or the ledger itself (a prune's entry).
func HistorySubject(e ledger.HistoryEntry) string {
	switch {
	case e.ChangeID != "":
		return "change " + e.ChangeID
	case e.RunID != "":
		return "run " + e.RunID
	}
	return "the ledger"
}

// ScanHistory reads one row of HistorySelect.
func ScanHistory(s Scanner) (ledger.HistoryEntry, error) {
	var e ledger.HistoryEntry
	var at sql.NullInt64
	var change, run, approval sql.NullString
	if err := s.Scan(&e.Seq, &at, &change, &run, &e.From, &e.To, &e.By, &e.Note, &approval); err != nil {
		return e, err
	}
	e.At, e.ChangeID, e.RunID, e.ApprovalID = TimeFrom(at), change.String, run.String, approval.String
	return e, nil
}

// HistoryWhere is the clause that selects the entries f selects, except
// for its Limit; the order is OldestFirst.
func HistoryWhere(d Dialect, f ledger.HistoryFilter) *Where {
	w := NewWhere(d)
	if !f.Since.IsZero() {
		// The least seq of the entries at or after Since, read from the
		// index of at, bounds the scan in seq order, which would
		// otherwise start at the oldest entry. (min(seq + 0), not
		// min(seq): SQLite answers a bare min(seq) by walking the table
		// in seq order to the first match, the very scan this avoids.)
		// at >= Since still decides which entries match.
		since := CeilMicro(f.Since)
		w.Cond("seq >= (SELECT min(seq + 0) FROM ledger_history WHERE at >= " + w.Arg(since) + ")")
		w.Cond("at >= " + w.Arg(since))
	}
	if f.ChangeID != "" {
		w.Cond("change_id = " + w.Arg(f.ChangeID))
	}
	if f.RunID != "" {
		w.Cond("run_id = " + w.Arg(f.RunID))
	}
	if f.By != "" {
		w.Cond("actor = " + w.Arg(f.By))
	}
	if f.ApprovalID != "" {
		w.Cond("approval_id = " + w.Arg(f.ApprovalID))
	}
	if f.After > 0 {
		w.Cond("seq > " + w.Arg(f.After))
	}
	return w
}

// OldestFirst is the order of the history: by seq, ascending.
const OldestFirst = " ORDER BY seq"

// TallyColumns is the select list of a tally of changes, grouped by
// TallyGroup.
const (
	TallyColumns = "action, status, count(*), max(updated_at)"
	TallyGroup   = " GROUP BY action, status ORDER BY action, status"
)

// ScanTallies reads the rows of a tally query.
func ScanTallies(rows *sql.Rows) ([]ledger.Tally, error) {
	defer rows.Close()
	var out []ledger.Tally
	for rows.Next() {
		var t ledger.Tally
		var updated sql.NullInt64
		if err := rows.Scan(&t.Action, &t.Status, &t.N, &updated); err != nil {
			return nil, err
		}
		t.Updated = TimeFrom(updated)
		out = append(out, t)
	}
	return out, rows.Err()
}
