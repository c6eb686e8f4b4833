package postgres

import "github.com/mcp-changeset/changeset-go/ledger"

// ListChangesQuery is the statement ListChanges runs for f, and its
// arguments, for the plan tests.
func ListChangesQuery(b *Backend, f ledger.ChangeFilter) (string, []any) {
	return listChangesQuery(b, f)
}
