package postgres

import (
	"context"
	"database/sql"
	"errors"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/mcp-changeset/changeset-go/ledger"
	"github.com/mcp-changeset/changeset-go/ledger/driver"
	"github.com/mcp-changeset/changeset-go/ledger/internal/sqlval"
)

// InsertApproval stores a new approval. It fails if the ID exists or its
// change or run does not.
func (b *Backend) InsertApproval(ctx context.Context, q driver.Querier, a *ledger.Approval) error {
	_, err := q.ExecContext(ctx, `INSERT INTO `+b.table("ledger_approvals")+` (`+sqlval.Approvals.Columns()+`) VALUES (`+
		placeholders(1, sqlval.Approvals.Len())+`)`, sqlval.Approvals.InsertArgs(a, dialect)...)
	return b.interpretError("insert approval "+a.ID, err)
}

// GetApproval reads one approval. Inside a transaction it locks the row
// until the transaction ends, so that two decisions on one approval, or a
// decision and a use, are serialised. A missing one is an error wrapping
// [ledger.ErrNotFound].
func (b *Backend) GetApproval(ctx context.Context, q driver.Querier, id string) (*ledger.Approval, error) {
	query := `SELECT ` + sqlval.Approvals.Columns() + ` FROM ` + b.table("ledger_approvals") + ` WHERE id = $1`
	if b.locks(q) {
		query += ` FOR UPDATE`
	}
	a, err := sqlval.Approvals.Scan(q.QueryRowContext(ctx, query, id))
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
	n := sqlval.Approvals.Mutable()
	res, err := q.ExecContext(ctx, `UPDATE `+b.table("ledger_approvals")+` SET `+sqlval.Approvals.Assignments(dollar)+
		` WHERE id = `+dollar(n+1)+` AND status = `+dollar(n+2), sqlval.Approvals.UpdateArgs(a, dialect, a.ID, string(from))...)
	if err != nil {
		return b.interpretError(op+" approval "+a.ID, err)
	}
	if n, err := res.RowsAffected(); err != nil || n == 1 {
		return b.interpretError(op+" approval "+a.ID, err)
	}
	var now string
	switch err := q.QueryRowContext(ctx, `SELECT status FROM `+b.table("ledger_approvals")+` WHERE id = $1`, a.ID).Scan(&now); {
	case errors.Is(err, sql.ErrNoRows):
		return rowError(op, "approval", a.ID, ledger.ErrNotFound)
	case err != nil:
		return b.interpretError(op+" approval "+a.ID, err)
	}
	return rowError(op, "approval", a.ID, conflict(string(from), now))
}

// ListApprovals returns the approvals that match f, newest first. It locks
// nothing.
func (b *Backend) ListApprovals(ctx context.Context, q driver.Querier, f ledger.ApprovalFilter) ([]*ledger.Approval, error) {
	w := sqlval.ApprovalWhere(dialect, f)
	const op = "list approvals in"
	rows, err := q.QueryContext(ctx, `SELECT `+sqlval.Approvals.Columns()+` FROM `+b.table("ledger_approvals")+
		w.String()+sqlval.NewestFirst+w.Limit(f.Limit), w.Args...)
	if err != nil {
		return nil, b.interpretError(op, err)
	}
	out, err := sqlval.ScanAll(rows, sqlval.Approvals.Scan)
	return out, b.interpretError(op, err)
}

// InsertDecision stores a decision; a second one of the same person on the
// same approval is an error wrapping [ledger.ErrDecided].
func (b *Backend) InsertDecision(ctx context.Context, q driver.Querier, d ledger.Decision) error {
	_, err := q.ExecContext(ctx, `INSERT INTO `+b.table("ledger_decisions")+` (`+sqlval.DecisionColumns+`) VALUES ($1, $2, $3, $4, $5)`,
		sqlval.DecisionArgs(d)...)
	var pe *pgconn.PgError
	if errors.As(err, &pe) && pe.Code == codeUniqueViolation && pe.ConstraintName == "ledger_decisions_pkey" {
		return rowError("decide", "approval", d.ApprovalID, ledger.ErrDecided)
	}
	return b.interpretError("record a decision on approval "+d.ApprovalID+" in", err)
}

// ListDecisions returns the decisions of an approval, oldest first.
func (b *Backend) ListDecisions(ctx context.Context, q driver.Querier, approvalID string) ([]ledger.Decision, error) {
	const op = "list decisions in"
	rows, err := q.QueryContext(ctx, `SELECT `+sqlval.DecisionColumns+` FROM `+b.table("ledger_decisions")+
		` WHERE approval_id = $1 ORDER BY at, person`, approvalID)
	if err != nil {
		return nil, b.interpretError(op, err)
	}
	out, err := sqlval.ScanAll(rows, sqlval.ScanDecision)
	return out, b.interpretError(op, err)
}
