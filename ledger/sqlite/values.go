package sqlite

import (
	"strings"
)

// Values are stored as package sqlval says; bool is INTEGER 0 or 1 here.

// maxIDsPerStatement bounds the placeholders of one IN list, well under
// SQLite's limit on host parameters.
const maxIDsPerStatement = 500

func boolArg(b bool) int64 {
	if b {
		return 1
	}
	return 0
}

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
