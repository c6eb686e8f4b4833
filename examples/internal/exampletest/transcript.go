package exampletest

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"regexp"
	"strings"
	"testing"
	"time"
	"unicode"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// update rewrites golden transcripts instead of comparing with them:
// go test ./examples/settings -run Transcript -update.
var update = flag.Bool("update", false, "rewrite the golden transcripts in testdata")

// Transcript records every text a server sends the agent in a scripted
// session (its instructions, its tool list, every result and every tool
// error), so that a test can pin them in a golden file: a change of
// wording is then a reviewed diff of that file. IDs, tokens, hashes and
// times, which differ on every run, are replaced by stable names in the
// order they first appear (chg_1, run_1, <confirm 1>, <hash 1>, <time>).
type Transcript struct {
	c     *Client
	steps []step
	names map[string]string
	count map[string]int
}

type step struct{ name, text string }

// NewTranscript starts a transcript of c's session with its instructions
// and its tool list.
func NewTranscript(c *Client) *Transcript {
	tr := &Transcript{c: c, names: map[string]string{}, count: map[string]int{}}
	init := c.Session.InitializeResult()
	instructions := ""
	if init != nil {
		instructions = init.Instructions
	}
	tr.add("instructions", instructions)
	res, err := c.Session.ListTools(context.Background(), nil)
	if err != nil {
		c.t.Fatalf("list tools: %v", err)
	}
	tools, err := json.MarshalIndent(res.Tools, "", "  ")
	if err != nil {
		c.t.Fatal(err)
	}
	tr.add("tools/list", string(tools))
	return tr
}

// Call calls a tool, records its arguments and what came back, and
// returns the structured result (nil on a tool error) and the error text.
func (tr *Transcript) Call(name string, args map[string]any) (map[string]any, string) {
	tr.c.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	res, err := tr.c.Session.CallTool(ctx, &mcp.CallToolParams{Name: name, Arguments: args})
	if err != nil {
		tr.c.t.Fatalf("%s: %v", name, err)
	}
	in, _ := json.MarshalIndent(args, "", "  ")
	var b strings.Builder
	fmt.Fprintf(&b, "arguments: %s\n", in)
	var texts []string
	for _, content := range res.Content {
		if tc, ok := content.(*mcp.TextContent); ok {
			texts = append(texts, tc.Text)
		}
	}
	if res.IsError {
		fmt.Fprintf(&b, "tool error: %s", strings.Join(texts, "\n"))
		tr.add(name, b.String())
		return nil, strings.Join(texts, "\n")
	}
	out := map[string]any{}
	Decode(tr.c.t, res.StructuredContent, &out)
	pretty, _ := json.MarshalIndent(out, "", "  ")
	fmt.Fprintf(&b, "result: %s", pretty)
	tr.add(name, b.String())
	return out, ""
}

// Note records a line of the script's own, e.g. what a person did between
// two calls.
func (tr *Transcript) Note(text string) { tr.add("note", text) }

// add records one step with its varying parts named and its invisible
// characters made visible.
func (tr *Transcript) add(name, text string) {
	tr.steps = append(tr.steps, step{fmt.Sprintf("%02d %s", len(tr.steps)+1, name), visible(tr.stable(text))})
}

// visible writes each raw control or format character of text (an ANSI
// escape, a bidirectional override) as «U+XXXX», so that the golden file
// shows where one reached the agent unescaped; newlines and tabs stay.
func visible(text string) string {
	var b strings.Builder
	for _, r := range text {
		if r != '\n' && r != '\t' && (unicode.IsControl(r) || unicode.Is(unicode.Cf, r) || r == '\u2028' || r == '\u2029') {
			fmt.Fprintf(&b, "«U+%04X»", r)
			continue
		}
		b.WriteRune(r)
	}
	return b.String()
}

// varying matches what differs from run to run: IDs, tokens, times, the
// hash of a receipt (a history entry's hash covers its time; other hashes,
// of contents, stay as they are) and the paths of temporary directories.
var varying = regexp.MustCompile(`\b(chg|run|apr)_[0-9a-f]{20}\b|\b(confirm|undo)_[A-Za-z0-9_-]{24,}|"hash": "[0-9a-f]{64}"|\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?Z|(/tmp|/var/folders)/[^\s"]+`)

func (tr *Transcript) stable(text string) string {
	return varying.ReplaceAllStringFunc(text, func(s string) string {
		if hex, ok := strings.CutPrefix(s, `"hash": "`); ok {
			return `"hash": "` + tr.name(strings.TrimSuffix(hex, `"`)) + `"`
		}
		return tr.name(s)
	})
}

// name is the stable name of s, one of varying's matches (a receipt's
// hash without its key).
func (tr *Transcript) name(s string) string {
	if n, ok := tr.names[s]; ok {
		return n
	}
	var kind string
	switch {
	case strings.HasPrefix(s, "chg_"), strings.HasPrefix(s, "run_"), strings.HasPrefix(s, "apr_"):
		kind = s[:3]
	case strings.HasPrefix(s, "confirm_"):
		kind = "<confirm"
	case strings.HasPrefix(s, "undo_"):
		kind = "<undo"
	case strings.HasPrefix(s, "/"):
		return "<tmp>"
	case len(s) == 64:
		kind = "<hash"
	default:
		return "<time>"
	}
	tr.count[kind]++
	n := fmt.Sprintf("%s_%d", kind, tr.count[kind])
	if kind[0] == '<' {
		n = fmt.Sprintf("%s %d>", kind, tr.count[kind])
	}
	tr.names[s] = n
	return n
}

// txtar is the transcript in txtar form: a comment, then one file per
// step.
func (tr *Transcript) txtar(comment string) []byte {
	var b bytes.Buffer
	b.WriteString(strings.TrimSpace(comment) + "\n")
	for _, s := range tr.steps {
		fmt.Fprintf(&b, "-- %s --\n%s\n", s.name, strings.TrimRight(s.text, "\n"))
	}
	return b.Bytes()
}

// Check compares the transcript with the golden file at path, or rewrites
// that file when the test runs with -update. comment heads the file.
func (tr *Transcript) Check(t *testing.T, path, comment string) {
	t.Helper()
	got := tr.txtar(comment)
	if *update {
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run the test with -update to write it)", err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("the texts the agent receives differ from %s; if the change is meant, review it and rewrite the file with -update:\n%s", path, firstDifference(want, got))
	}
}

// firstDifference shows the first lines that differ, for the failure.
func firstDifference(want, got []byte) string {
	w, g := strings.Split(string(want), "\n"), strings.Split(string(got), "\n")
	for i := 0; i < max(len(w), len(g)); i++ {
		var wl, gl string
		if i < len(w) {
			wl = w[i]
		}
		if i < len(g) {
			gl = g[i]
		}
		if wl != gl {
			return fmt.Sprintf("line %d\n  want: %s\n  got:  %s", i+1, wl, gl)
		}
	}
	return "(lengths differ)"
}
