package clients

import (
	"fmt"
	"maps"
	"path/filepath"
	"slices"
	"testing"

	"github.com/mcp-changeset/changeset-go/examples/internal/exampletest"
)

// What tools/list costs an agent. Every client puts the whole tools/list
// response into the model's context at the start of every conversation.
// DESIGN.md ("Third wave → What the agent reads") sets the budget: the
// settings example at most 8,000 bytes on the wire, no tool's entry over
// 2,000. The other examples serve more tools; each holds a budget a few
// percent above what it measured, so that a schema or a description that
// grows is a reviewed change of this table (docs/agent-cost.md says how
// the schemas got there).

// maxToolEntryBytes caps one tool's entry in tools/list, in every example
// (undo_run, the largest, measured 1,978 bytes).
const maxToolEntryBytes = 2000

// budgetExample is an example server that serves MCP tools, how to start
// it, and its tools/list budget in bytes.
type budgetExample struct {
	name   string
	budget int
	args   func(t *testing.T) []string
	env    []string
}

// budgetExamples are every example under examples/ that serves MCP tools
// (clientdemo is a client).
var budgetExamples = []budgetExample{
	{name: "settings", budget: 8000 /* the contract; measured 7975 */},
	// Under person approval the previews and undo_run also describe the
	// approval they return.
	{name: "settings", budget: 8400 /* measured 8186 */, args: func(*testing.T) []string { return []string{"--approval", "person"} }},
	{name: "elicit", budget: 8600 /* measured 8343 */},
	{name: "notes", budget: 9950 /* measured 9646 */, args: func(t *testing.T) []string { return []string{"--root", t.TempDir()} }},
	{name: "todo", budget: 10450 /* measured 10156 */},
	{name: "tickets", budget: 10400 /* measured 10087 */},
	{name: "flags", budget: 10900 /* measured 10592 */, args: func(t *testing.T) []string { return []string{"--file", filepath.Join(t.TempDir(), "flags.json")} }},
	{name: "contacts", budget: 10350 /* measured 10063 */, args: func(t *testing.T) []string { return []string{"--db", filepath.Join(t.TempDir(), "contacts.db")} }},
	{name: "githublabels", budget: 9350, /* measured 9085 */
		// Listing tools calls no API: the URL is never dialled.
		args: func(*testing.T) []string { return []string{"--repo", "octo/hello", "--api-url", "http://127.0.0.1:1"} }},
	{name: "inventory", budget: 14850 /* measured 14412 */, args: func(t *testing.T) []string {
		dir := t.TempDir()
		return []string{"--db", filepath.Join(dir, "shop.db"), "--settings", filepath.Join(dir, "shop-settings.json")}
	}},
}

// TestToolsList_ByteBudget measures each example's tools/list over stdio,
// as the server writes it, listed by a go-sdk client, and holds it to the
// example's budget and every entry to maxToolEntryBytes.
func TestToolsList_ByteBudget(t *testing.T) {
	for _, ex := range budgetExamples {
		t.Run(ex.name, func(t *testing.T) {
			t.Parallel()
			var args []string
			if ex.args != nil {
				args = ex.args(t)
			}
			l := exampletest.MeasureToolsList(t, ex.name, args, append([]string{exampletest.Guarded}, ex.env...)...)
			largest, largestBytes := l.Largest()
			t.Logf("%s: tools/list %d bytes, %d tools, largest %s %d bytes", ex.name, l.Bytes, len(l.Tools), largest, largestBytes)
			for _, name := range slices.Sorted(maps.Keys(l.Tools)) {
				t.Logf("  %-24s %5d", name, l.Tools[name])
			}
			if l.Bytes > ex.budget {
				t.Errorf("tools/list of %s is %d bytes, over its budget of %d", ex.name, l.Bytes, ex.budget)
			}
			for _, name := range slices.Sorted(maps.Keys(l.Tools)) {
				if n := l.Tools[name]; n > maxToolEntryBytes {
					t.Errorf("the entry of %s is %d bytes, over %d: %s", name, n, maxToolEntryBytes, brief(l.Entries[name]))
				}
			}
		})
	}
}

func brief(b []byte) string {
	if len(b) > 400 {
		return fmt.Sprintf("%s…(%d bytes)", b[:400], len(b))
	}
	return string(b)
}
