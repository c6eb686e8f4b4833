package sqlval

import (
	"database/sql"
	"math"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

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
	if len(statuses) == 1 && !w.d.OpenIndex {
		// An equality, not "= ANY(array)": PostgreSQL reads an index
		// on (status, created_at, id) in order only for an equality.
		w.Cond("status = " + w.Arg(string(statuses[0])))
		return
	}
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

// ChangeTables names the tables a filter of changes reads, as the
// backend's SQL must spell them (schema-qualified on PostgreSQL).
type ChangeTables struct {
	Changes string // the changes
	Deps    string // change_deps
	// Text is the full-text index of a dialect with TextIndex; the table
	// Text+"_tail" holds the greatest rowid it covers.
	Text string
	// Actors, if set, names a table of (actor, created_at, id), one row
	// per actor of each change (who previewed, applied or undid it), keyed
	// in that order: a filter by actor reads its candidates from it (see
	// ChangeList). Without it, the filter tests the three columns of
	// changes, which have an index each (PostgreSQL).
	Actors string
	// CommonText says that ChangeFilter.Text is in many changes (the
	// backend asked the full-text index): a page is then found sooner by
	// reading the list in its order and testing each change's text than
	// by reading every match and sorting them, so the index is not asked.
	CommonText bool
}

// ChangeWhere is the clause that selects the changes f selects, except for
// its Limit. paged says whether to apply f.Before (CountChanges does not).
func ChangeWhere(d Dialect, f ledger.ChangeFilter, t ChangeTables, paged bool) *Where {
	w := NewWhere(d)
	w.change(f, t, paged)
	return w
}

// change adds the conditions of f to w.
func (w *Where) change(f ledger.ChangeFilter, t ChangeTables, paged bool) {
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
		w.text(f.Text, t)
	}
	if f.DependsOn != "" {
		w.Cond("id IN (SELECT change_id FROM " + t.Deps + " WHERE resource = " + w.Arg(f.DependsOn) + ")")
	}
	if len(f.DependsOnAny) > 0 {
		w.Cond("id IN (SELECT change_id FROM " + t.Deps + " WHERE " + w.anyOf("resource", f.DependsOnAny) + ")")
	}
	if f.By != "" {
		if t.Actors != "" {
			w.Cond("id IN (SELECT id FROM " + t.Actors + " WHERE actor = " + w.Arg(f.By) + ")")
		}
		// The exact test, which alone decides: the table of actors only
		// proposes candidates.
		w.Cond("(previewed_by = " + w.Arg(f.By) + " OR applied_by = " + w.Arg(f.By) + " OR undone_by = " + w.Arg(f.By) + ")")
	}
	if paged && f.Before != nil {
		w.after(f.Before.CreatedAt, f.Before.ID)
	}
}

// text adds the condition of ChangeFilter.Text. The exact test is
// LOWER(column) LIKE '%text%' over summary, action and resource, with the
// text's wildcards escaped; it alone decides which changes match. What
// finds the candidates depends on the text's length:
//
//   - ledger.MinIndexedText characters or more: an index of trigrams. On
//     a dialect with TextIndex (SQLite) the condition names the rowids
//     the FTS5 table finds for the text as a phrase (its trigrams in
//     sequence, case folded), a superset of the matches among the rows
//     it covers, and the rows after them (Text+"_tail" holds the last
//     rowid covered; fewer than 128 rows are newer), unless the backend
//     found the text common (ChangeTables.CommonText); on
//     PostgreSQL the planner reads the pg_trgm index on LOWER(column)
//     for the LIKE terms themselves, or not, as its statistics say.
//   - shorter: no trigram index can narrow it, so the test runs only on
//     the ledger.ShortTextWindow newest changes (by creation time).
func (w *Where) text(text string, t ChangeTables) {
	short := utf8.RuneCountInString(text) < ledger.MinIndexedText
	switch {
	case short:
		w.Cond("created_at >= COALESCE((SELECT created_at FROM " + t.Changes + NewestFirst +
			" LIMIT 1 OFFSET " + w.Arg(ledger.ShortTextWindow-1) + "), " + w.Arg(int64(math.MinInt64)) + ")")
	case w.d.TextIndex && !t.CommonText:
		w.Cond("rowid IN (SELECT rowid FROM " + t.Text + " WHERE " + t.Text + " MATCH " + w.Arg(FTSPhrase(text)) +
			" UNION ALL SELECT rowid FROM " + t.Changes + " WHERE rowid > (SELECT indexed FROM " + t.Text + "_tail))")
	}
	pattern := "%" + likeEscape(text) + "%"
	var ors []string
	for _, col := range []string{"summary", "action", "resource"} {
		ors = append(ors, "LOWER("+col+") LIKE LOWER("+w.Arg(pattern)+`) ESCAPE '\'`)
	}
	w.Cond("(" + strings.Join(ors, " OR ") + ")")
}

// FTSPhrase is text as an FTS5 string, which the trigram tokenizer reads
// as the phrase of its trigrams: double quotes doubled, nothing else
// special.
func FTSPhrase(text string) string {
	return `"` + strings.ReplaceAll(text, `"`, `""`) + `"`
}

// ChangeList is the statement that lists the changes f selects, newest
// first, at most f.Limit of them from just after f.Before, and its
// arguments. selectFrom is "SELECT <the columns> FROM <changes>".
//
// A page of a filter that a single index range cannot serve in the
// list's order is read as a merge: a filter by actor matches any of three
// columns, and a filter on several statuses any of several values. Each
// of those (column, status) pairs is a branch that reads its own index
// range newest first and stops at the page's size; the page is the
// newest of the branches' rows, without duplicates (one actor may have
// previewed and applied a change). Every branch repeats the rest of the
// filter, so each reads at most the rows of one index range up to the
// page, never the whole table, and never sorts more than a page per
// branch. Without a limit, the plain clause is as good: every match is
// read anyway.
//
// With ChangeTables.Actors, a page of a filter by actor needs no merge:
// the actor's range of that table is already in the list's order, each
// change once, so the page reads it newest first and tests each
// candidate's row against the rest of the filter (and the exact test of
// the actor), stopping when the page is full.
func ChangeList(d Dialect, f ledger.ChangeFilter, t ChangeTables, selectFrom string) (string, []any) {
	if f.By != "" && t.Actors != "" && f.Limit > 0 {
		return actorPage(d, f, t, selectFrom)
	}
	actors := []string{""}
	if f.By != "" {
		actors = []string{"previewed_by", "applied_by", "undone_by"}
	}
	statuses := [][]ledger.Status{f.Statuses}
	if len(f.Statuses) > 1 {
		statuses = statuses[:0]
		for _, s := range f.Statuses {
			statuses = append(statuses, []ledger.Status{s})
		}
	}
	if f.Limit <= 0 || len(actors)*len(statuses) == 1 {
		w := ChangeWhere(d, f, t, true)
		return selectFrom + w.String() + NewestFirst + w.Limit(f.Limit), w.Args
	}
	w := NewWhere(d)
	var branches []string
	for _, st := range statuses {
		for _, col := range actors {
			bf := f
			bf.Statuses, bf.By = st, ""
			b := &Where{d: d, Args: w.Args}
			if col != "" {
				b.Cond(col + " = " + b.Arg(f.By))
			}
			b.change(bf, t, true)
			branches = append(branches, "SELECT created_at, id FROM (SELECT created_at, id FROM "+t.Changes+
				b.String()+NewestFirst+b.Limit(f.Limit)+") AS b"+strconv.Itoa(len(branches)))
			w.Args = b.Args
		}
	}
	page := strings.Join(branches, " UNION ") + NewestFirst + w.Limit(f.Limit)
	return selectFrom + " WHERE id IN (SELECT id FROM (" + page + ") AS page)" + NewestFirst, w.Args
}

// actorPage is the statement of ChangeList for a page of a filter by
// actor on a dialect with ChangeTables.Actors, and its arguments.
func actorPage(d Dialect, f ledger.ChangeFilter, t ChangeTables, selectFrom string) (string, []any) {
	w := NewWhere(d)
	w.Cond("actor = " + w.Arg(f.By))
	if f.Before != nil {
		w.after(f.Before.CreatedAt, f.Before.ID) // the key of the actors' table
	}
	// The candidate's row: in the subquery, unqualified names are those of
	// changes.
	row := &Where{d: d, Args: w.Args}
	row.Cond("id = " + t.Actors + ".id")
	rf := f
	rf.Before = nil
	rt := t
	rt.Actors = ""
	row.change(rf, rt, true)
	w.Args = row.Args
	w.Cond("EXISTS (SELECT 1 FROM " + t.Changes + row.String() + ")")
	page := "SELECT created_at, id FROM " + t.Actors + w.String() + NewestFirst + w.Limit(f.Limit)
	return selectFrom + " WHERE id IN (SELECT id FROM (" + page + ") AS page)" + NewestFirst, w.Args
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
	if f.StartedBy != "" {
		w.Cond("started_by = " + w.Arg(f.StartedBy))
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
// writes, in the order of HistoryArgs, and that ScanHistory reads.
const HistoryColumns = "seq, at, change_id, run_id, from_status, to_status, actor, note, approval_id, removed, hash"

// HistorySelect are the columns ScanHistory reads.
const HistorySelect = HistoryColumns

// HistoryArgs binds e to HistoryColumns.
func HistoryArgs(e ledger.HistoryEntry) []any {
	return []any{e.Seq, TimeArg(e.At), OptString(e.ChangeID), OptString(e.RunID), e.From, e.To, e.By, e.Note,
		OptString(e.ApprovalID), e.Removed, e.Hash[:]}
}

// ScanHistory reads one row of HistorySelect. A hash that is missing or
// not 32 bytes long reads as the zero Hash, which never chains.
func ScanHistory(s Scanner) (ledger.HistoryEntry, error) {
	var e ledger.HistoryEntry
	var at sql.NullInt64
	var change, run, approval sql.NullString
	var hash []byte
	if err := s.Scan(&e.Seq, &at, &change, &run, &e.From, &e.To, &e.By, &e.Note, &approval, &e.Removed, &hash); err != nil {
		return e, err
	}
	e.At, e.ChangeID, e.RunID, e.ApprovalID = TimeFrom(at), change.String, run.String, approval.String
	if len(hash) == len(e.Hash) {
		e.Hash = ledger.Hash(hash)
	}
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
