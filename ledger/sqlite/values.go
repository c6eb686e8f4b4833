package sqlite

import (
	"strings"

	"github.com/mcp-changeset/changeset-go/ledger/internal/sqlval"
)

// Values are stored as package sqlval says; bool is INTEGER 0 or 1 here.

// maxIDsPerStatement bounds the placeholders of one IN list, well under
// SQLite's limit on host parameters.
const maxIDsPerStatement = 500

// dialect is how this backend spells booleans (INTEGER 0 or 1) and
// parameters ("?", one per value of a list); its changes table has the
// partial index changes_open (migration 005).
var dialect = sqlval.Dialect{
	Bool: func(b bool) any {
		if b {
			return int64(1)
		}
		return int64(0)
	},
	Param:     question,
	OpenIndex: true,
	TextIndex: true,
}

// question is the placeholder of every parameter.
func question(int) string { return "?" }

// placeholders returns "?, ?, ..." with n question marks.
func placeholders(n int) string {
	if n <= 0 {
		return ""
	}
	return strings.Repeat("?, ", n-1) + "?"
}

// appendStrings appends every element of s to args as a separate argument.
func appendStrings[S ~string](args []any, s []S) []any {
	for _, v := range s {
		args = append(args, string(v))
	}
	return args
}

// chunks splits ids into slices of at most maxIDsPerStatement.
func chunks(ids []string) [][]string {
	var out [][]string
	for len(ids) > maxIDsPerStatement {
		out = append(out, ids[:maxIDsPerStatement])
		ids = ids[maxIDsPerStatement:]
	}
	if len(ids) > 0 {
		out = append(out, ids)
	}
	return out
}
