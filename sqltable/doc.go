// Package sqltable registers guarded create, update and delete operations
// on the rows of one table of an application's own database, through
// database/sql, on SQLite and PostgreSQL, and one operation that updates
// every row matching a condition as one change.
//
//	contacts, err := sqltable.Open(ctx, db, sqltable.Config{Table: "contacts", Kind: "contact"})
//	…
//	sqltable.Create(guard, &mcp.Tool{Name: "create_contact"}, contacts,
//		func(ctx context.Context, in createIn) (sqltable.Row, error) {
//			return sqltable.Row{"name": in.Name, "email": in.Email}, nil
//		})
//	sqltable.Update(guard, &mcp.Tool{Name: "update_contact"}, contacts,
//		func(ctx context.Context, in updateIn) (any, sqltable.Row, error) {
//			return in.ID, sqltable.Row{"name": in.Name}, nil
//		})
//	sqltable.Delete(guard, &mcp.Tool{Name: "delete_contact"}, contacts,
//		func(ctx context.Context, in deleteIn) (any, error) { return in.ID, nil })
//
// Each change stores the whole row before and after; its Resource is
// "<kind>:<key>" ("contact:7"), its Snapshot the row's state the preview
// read, its diff [changeset.Diff] of the two states, and its undo restores
// the row: the undo of a delete inserts it again with the same key and
// every column as it was, its creation time included. Every apply and undo
// first reads the row inside its transaction (locked with FOR UPDATE on
// PostgreSQL) and compares it with what the change expects: an apply, the
// version column when the table has one ([Config].Version; every write,
// undos included, bumps it, so a version never comes back), the row's
// state otherwise; an undo, the row's state, and then writes only if the
// version is still the one it read. A row that changed ends the apply as
// a state_changed failure with nothing written, and a run's undo skips
// such a change and reports its drift.
//
// # What counts
//
// A row's state, what every operation observes and compares, is all of
// its columns but the version (the adapter's own token, bumped by undos
// too), those in [Config].Ignore and the [Config].Stamp column: an
// updated_at, a position, a counter that people and other programs touch
// without it being anyone's work. Those columns are in no diff, and
// a person who touches only them blocks neither an apply nor an undo. The
// stamp column is set by the adapter on every write it makes (to the time
// in UTC as RFC 3339 text unless [Config].StampValue says otherwise), so
// that the application's own "last modified" stays right; the caller
// cannot set it. Every operation goes through one function for a row's
// state, so that a run's undo can compare the state one change left with
// the state another found, byte for byte.
//
// A label column ([Config].Label) names rows in summaries: `Update product
// "Green tea" (TEA-003)` instead of `Update product TEA-003`.
//
// # Many rows in one change
//
// [UpdateMatching] updates every row whose columns equal a condition, a
// price rise for one category, as one change whose Resources are the rows:
//
//	products, err := sqltable.Open(ctx, db, sqltable.Config{Table: "products", Kind: "product",
//		Key: "sku", Label: "name", Stamp: "updated_at"})
//	…
//	sqltable.UpdateMatching(guard, &mcp.Tool{Name: "adjust_prices"}, products,
//		func(ctx context.Context, in adjustIn) (sqltable.Row, func(sqltable.Row) (sqltable.Row, error), error) {
//			return sqltable.Row{"category": in.Category}, func(r sqltable.Row) (sqltable.Row, error) {
//				cents := r["price_cents"].(int64)
//				return sqltable.Row{"price_cents": cents + cents*in.Percent/100}, nil
//			}, nil
//		})
//
// Its preview reads the matching rows (at most [Config].MaxRows), its diff
// names each row and column ("TEA-003 price_cents"), and its apply and its
// undo each write every row or none: one row that a person changed in
// between refuses the whole write. Each row's state is observed as [Update]
// observes it, so a run's undo relates the bulk change to the single-row
// changes of the same rows.
//
// # Exactly once or at most once
//
// Where the table is decides what the library can promise, and the adapter
// picks the kind of operation itself:
//
//   - A table in the ledger's own database (db is the same *sql.DB as
//     guard.Ledger().DB()) gets transactional operations
//     (ApplyTx): the claim, the check, the write and the
//     ledger's record of it commit together or not at all. A change is
//     applied exactly once, even if the process dies at any point.
//   - A table in any other database gets ordinary operations
//     (changeset.Operation), each write in a transaction of its own on that
//     database. A change is applied at most once: if the process dies
//     between the write and the ledger's record of it, the change stays
//     "applying" for an operator to reconcile (the row shows whether it
//     happened).
//
// # Values
//
// A Row's values are canonical, so that a row reads the same JSON on
// SQLite and on PostgreSQL and survives the ledger exactly:
//
//   - NULL is nil, kept apart from the empty string;
//   - integers are int64, exact at any size (not float64: a JSON number
//     above 2^53 would lose digits);
//   - floating-point numbers are float64 (NaN and infinities are refused:
//     JSON has none);
//   - text is string;
//   - booleans are bool (SQLite's 0 and 1 in a column declared BOOLEAN
//     too);
//   - PostgreSQL times (timestamptz, timestamp, date) are RFC 3339 text in
//     UTC with as many fractional digits as they need,
//     "2025-01-02T03:04:05.123456Z", and so is a time.Time given in a Row.
//     SQLite has no time type: its values are read as stored, so that an
//     undo writes back the very text it found. Store RFC 3339 text in UTC
//     (DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ'))) and SQLite rows read as
//     PostgreSQL's do;
//   - other PostgreSQL types (numeric, uuid, json, interval) are their
//     text, which PostgreSQL parses back exactly.
//
// Binary columns (BLOB, bytea) are not carried: leave them out with
// Config.Columns. Rows given to the package may also hold the other Go
// integer and float types, pointers (nil is NULL), named string and number
// types and time.Time.
//
// # Safety
//
// Table and column names must be plain identifiers (letters, digits and
// underscores); Open checks them against the table and every statement
// quotes them. Values, keys included, only ever travel as parameters (? on
// SQLite, $n on PostgreSQL), never in the SQL text.
package sqltable
