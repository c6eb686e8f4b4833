package postgres

import (
	"os"
	"regexp"
	"strings"
	"testing"
)

// sqlBlock is a fenced SQL block of a Markdown file, indented or not.
var sqlBlock = regexp.MustCompile("(?s)```sql\n(.*?)```")

// DocGrants returns the GRANT statements that docs/postgres.md gives
// role ("app", the server's role, or "ops", the operator's read-only
// one), one a line, as they stand there. It fails the test unless exactly
// one SQL block of the document grants to role and holds nothing else.
func DocGrants(t testing.TB, role string) string {
	t.Helper()
	doc, err := os.ReadFile("../../docs/postgres.md")
	if err != nil {
		t.Fatal(err)
	}
	var found []string
	for _, m := range sqlBlock.FindAllStringSubmatch(string(doc), -1) {
		if !strings.Contains(m[1], " TO "+role+";") {
			continue
		}
		var b strings.Builder
		for line := range strings.Lines(m[1]) {
			line = strings.TrimSpace(line)
			if line == "" {
				continue
			}
			if !strings.HasPrefix(line, "GRANT ") || !strings.HasSuffix(line, " TO "+role+";") {
				t.Fatalf("docs/postgres.md: the SQL block that grants to %s holds %q, which is not a GRANT to %s", role, line, role)
			}
			b.WriteString(line + "\n")
		}
		found = append(found, b.String())
	}
	if len(found) != 1 {
		t.Fatalf("docs/postgres.md has %d SQL blocks granting to %s, want 1", len(found), role)
	}
	return found[0]
}

// docs/postgres.md shows the very privileges Open checks, for a server's
// role and for an operator's read-only one: neither can drift from the
// other, and the test that runs the library under the documented grants
// then holds the check to what the library needs.
func TestGrants_DocShowsWhatOpenChecks(t *testing.T) {
	for _, tc := range []struct {
		role     string
		readOnly bool
	}{{"app", false}, {"ops", true}} {
		if got, want := DocGrants(t, tc.role), grantSQL("notes", tc.role, needed(tc.readOnly)); got != want {
			t.Errorf("docs/postgres.md grants %s:\n%s\nOpen checks (readOnly %v):\n%s", tc.role, got, tc.readOnly, want)
		}
	}
}

func TestQuoteIdent_QuotesOnlyWhatNeedsIt(t *testing.T) {
	for in, want := range map[string]string{
		"notes":      "notes",
		"app_2":      "app_2",
		"App":        `"App"`,
		"2app":       `"2app"`,
		"app-server": `"app-server"`,
		`a"b`:        `"a""b"`,
	} {
		if got := quoteIdent(in); got != want {
			t.Errorf("quoteIdent(%q) = %s, want %s", in, got, want)
		}
	}
}
