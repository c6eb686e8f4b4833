package sqlite

import (
	"context"
	"database/sql"
	"errors"

	"github.com/mcp-changeset/changeset-go/ledger"
	"github.com/mcp-changeset/changeset-go/ledger/driver"
	"github.com/mcp-changeset/changeset-go/ledger/internal/sqlval"
	sqlite "modernc.org/sqlite"
)

// The statements of an approval's row and its decisions, built from
// sqlval.Approvals.
var (
	insertApprovalSQL = `INSERT INTO ledger_approvals (` + sqlval.Approvals.Columns() + `) VALUES (` + placeholders(sqlval.Approvals.Len()) + `)`
	getApprovalSQL    = `SELECT ` + sqlval.Approvals.Columns() + ` FROM ledger_approvals WHERE id = ?`
	updateApprovalSQL = `UPDATE ledger_approvals SET ` + sqlval.Approvals.Assignments(question) + ` WHERE id = ? AND status = ?`
	insertDecisionSQL = `INSERT INTO ledger_decisions (` + sqlval.DecisionColumns + `) VALUES (` + placeholders(5) + `)`
	listDecisionsSQL  = `SELECT ` + sqlval.DecisionColumns + ` FROM ledger_decisions WHERE approval_id = ? ORDER BY at, person`
)

// sqlitePrimaryKey is SQLITE_CONSTRAINT_PRIMARYKEY, the extended result
// code of a duplicate primary key.
const sqlitePrimaryKey = 1555

// InsertApproval stores a new approval. It fails if the ID exists or its
// change or run does not.
func (b *Backend) InsertApproval(ctx context.Context, q driver.Querier, a *ledger.Approval) error {
	_, err := q.ExecContext(ctx, insertApprovalSQL, sqlval.Approvals.InsertArgs(a, dialect)...)
	return b.interpretError("insert approval "+a.ID, err)
}

// GetApproval reads one approval. A missing one is an error wrapping
// [ledger.ErrNotFound].
func (b *Backend) GetApproval(ctx context.Context, q driver.Querier, id string) (*ledger.Approval, error) {
	a, err := sqlval.Approvals.Scan(q.QueryRowContext(ctx, getApprovalSQL, id))
	if err != nil {
		return nil, b.interpretError("find approval "+id, err)
	}
	return a, nil
}

// UpdateApproval writes a back if its stored status is still from, else
// fails with an error wrapping [ledger.ErrConflict] (or
// [ledger.ErrNotFound] when it is gone).
func (b *Backend) UpdateApproval(ctx context.Context, q driver.Querier, a *ledger.Approval, from ledger.ApprovalStatus) error {
	const op = "update"
	res, err := q.ExecContext(ctx, updateApprovalSQL, sqlval.Approvals.UpdateArgs(a, dialect, a.ID, string(from))...)
	if err != nil {
		return b.interpretError(op+" approval "+a.ID, err)
	}
	if n, err := res.RowsAffected(); err != nil || n == 1 {
		return b.interpretError(op+" approval "+a.ID, err)
	}
	var now string
	switch err := q.QueryRowContext(ctx, `SELECT status FROM ledger_approvals WHERE id = ?`, a.ID).Scan(&now); {
	case errors.Is(err, sql.ErrNoRows):
		return rowError(op, "approval", a.ID, ledger.ErrNotFound)
	case err != nil:
		return b.interpretError(op+" approval "+a.ID, err)
	}
	return rowError(op, "approval", a.ID, conflict(string(from), now))
}

// ListApprovals returns the approvals that match f, newest first.
func (b *Backend) ListApprovals(ctx context.Context, q driver.Querier, f ledger.ApprovalFilter) ([]*ledger.Approval, error) {
	query, args := listApprovalsQuery(f)
	const op = "list approvals in"
	rows, err := q.QueryContext(ctx, query, args...)
	if err != nil {
		return nil, b.interpretError(op, err)
	}
	out, err := sqlval.ScanAll(rows, sqlval.Approvals.Scan)
	return out, b.interpretError(op, err)
}

// listApprovalsQuery is the statement of ListApprovals and its arguments.
func listApprovalsQuery(f ledger.ApprovalFilter) (string, []any) {
	w := sqlval.ApprovalWhere(dialect, f)
	return `SELECT ` + sqlval.Approvals.Columns() + ` FROM ledger_approvals` + w.String() + sqlval.NewestFirst + w.Limit(f.Limit), w.Args
}

// InsertDecision stores a decision; a second one of the same person on the
// same approval is an error wrapping [ledger.ErrDecided].
func (b *Backend) InsertDecision(ctx context.Context, q driver.Querier, d ledger.Decision) error {
	_, err := q.ExecContext(ctx, insertDecisionSQL, sqlval.DecisionArgs(d)...)
	var se *sqlite.Error
	if errors.As(err, &se) && se.Code() == sqlitePrimaryKey {
		return rowError("decide", "approval", d.ApprovalID, ledger.ErrDecided)
	}
	return b.interpretError("record a decision on approval "+d.ApprovalID+" in", err)
}

// ListDecisions returns the decisions of an approval, oldest first.
func (b *Backend) ListDecisions(ctx context.Context, q driver.Querier, approvalID string) ([]ledger.Decision, error) {
	const op = "list decisions in"
	rows, err := q.QueryContext(ctx, listDecisionsSQL, approvalID)
	if err != nil {
		return nil, b.interpretError(op, err)
	}
	out, err := sqlval.ScanAll(rows, sqlval.ScanDecision)
	return out, b.interpretError(op, err)
}
