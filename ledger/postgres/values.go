package postgres

import (
	"strconv"
	"strings"

	"github.com/mcp-changeset/changeset-go/ledger/internal/sqlval"
)

// Values are stored as package sqlval says, exactly as in the SQLite
// ledger; bool is boolean here, and a list of IDs or statuses is one
// text[] parameter (= ANY($n)).

// dialect is how this backend spells booleans (boolean), parameters ($n)
// and lists (one text[] parameter).
var dialect = sqlval.Dialect{Bool: func(b bool) any { return b }, Param: dollar, ArrayParam: true}

// dollar is the n-th placeholder, $n.
func dollar(n int) string { return "$" + strconv.Itoa(n) }

// placeholders returns "$from, $from+1, …" with n placeholders.
func placeholders(from, n int) string {
	s := make([]string, n)
	for i := range s {
		s[i] = dollar(from + i)
	}
	return strings.Join(s, ", ")
}

// stringSlice converts statuses to the []string that binds as text[].
func stringSlice[S ~string](s []S) []string {
	out := make([]string, len(s))
	for i, v := range s {
		out[i] = string(v)
	}
	return out
}
