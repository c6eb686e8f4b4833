package main

import (
	"bytes"
	"context"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/mcp-changeset/changeset-go/internal/testkit"
)

// fullToken matches a confirmation or undo token printed in full.
var fullToken = regexp.MustCompile(`(confirm|undo)_[A-Za-z0-9_-]{20,}`)

// demoRun runs the demo as main does, with args, and returns its exit
// status and narration.
func demoRun(t *testing.T, args []string, tweak func(*demo)) (int, string) {
	t.Helper()
	if testing.Short() {
		t.Skip("builds and runs the notes server and mcp-changeset")
	}
	var out, errs testkit.Buffer
	code := runMain(context.Background(), args, &out, &errs, nil, tweak)
	if errs.String() != "" {
		t.Errorf("stderr: %s", errs.String())
	}
	return code, out.String()
}

// TestDemo runs the whole demo in its default mode: it is the project's
// smoke test, and fails when any promise it narrates breaks. Each promise
// has its line, no token is printed in full, and the whole fits on a
// screen.
func TestDemo(t *testing.T) {
	t.Parallel()
	code, out := demoRun(t, []string{"--dashboard-wait", "10ms"}, nil)
	if code != 0 {
		t.Fatalf("exit status %d:\n%s", code, out)
	}
	lines := strings.Split(strings.TrimRight(out, "\n"), "\n")
	if len(lines) > 60 {
		t.Errorf("the default output has %d lines, want at most 60:\n%s", len(lines), out)
	}
	promises := []struct{ what, pattern string }{
		{"the server starts with writes off", `(?m)^▸ started the notes server .*without MCP_CHANGESET_WRITE_MODE: writes are off`},
		{"a preview with its diff and a shortened token", `(?m)^✓ preview_write_note todo\.txt → chg_[0-9a-f]{4}… \(diff: content \(none\) → "buy milk\\n"\), token confirm_[A-Za-z0-9_-]{3}…; nothing written$`},
		{"writes off: the apply is refused", `(?m)^✓ apply_change chg_[0-9a-f]{4}… \(writes off\) → refused: .*writes are off.*the token was not spent; writes stay off until an operator sets MCP_CHANGESET_WRITE_MODE=guarded; todo\.txt not written$`},
		{"writes off: the token is not spent", `(?m)^✓ get_change_status chg_[0-9a-f]{4}… → still pending: the token is not spent$`},
		{"writes on: the same token applies", `(?m)^▸ restarted the notes server with MCP_CHANGESET_WRITE_MODE=guarded[^\n]*\n✓ apply_change chg_[0-9a-f]{4}… with the same token confirm_\S{3}… → applied; todo\.txt holds "buy milk\\n"`},
		{"a replay is refused", `(?m)^✓ apply_change chg_[0-9a-f]{4}… with confirm_\S{3}… again \(a replay\) → refused: .*cannot be applied \(status: applied\)$`},
		{"the undo", `(?m)^✓ undo_change chg_[0-9a-f]{4}… with undo_\S{3}… → undone; todo\.txt is gone again$`},
		{"the person's edit, made by the demo", `(?m)^▸ a person writes groceries\.txt before the apply \(the demo does it on disk\): "bread\\n"$`},
		{"state changed: the apply is refused, nothing written", `(?m)^✓ apply_change chg_[0-9a-f]{4}… → refused: .*the resource changed after the preview; nothing was written.*; groceries\.txt still holds the person's "bread\\n"$`},
		{"the run's dry run skips the edited note", `(?m)^✓ undo_run run_[0-9a-f]{4}… dry run → would undo actions\.txt, agenda\.txt; skip minutes\.txt \(its sha256 changed after the apply, outside the run\); nothing changed yet; token confirm_\S{3}…$`},
		{"the run's undo", `(?m)^✓ undo_run run_[0-9a-f]{4}… with confirm_\S{3}… → partially_undone: actions\.txt, agenda\.txt removed; minutes\.txt skipped, it keeps the person's edit$`},
		{"the CLI's listing", `(?m)^▸ mcp-changeset list --ledger \S+ledger\.db\n {4}ID +STATUS +ACTION +RUN +BY +UPDATED +SUMMARY\n(?: {4}chg_.*\n){5}`},
		{"the refused apply in the listing", `(?m)^ {4}chg_[0-9a-f]{20} +apply_failed +write_note .*Create note "groceries\.txt"`},
		{"the dashboard URL", `(?m)^▸ dashboard: http://127\.0\.0\.1:\d+/login\?token=\S+ — serving it for 10ms`},
		{"the verdict", `(?m)^✓ every step behaved as promised$`},
	}
	for _, p := range promises {
		if !regexp.MustCompile(p.pattern).MatchString(out) {
			t.Errorf("no line shows %s (%s)", p.what, p.pattern)
		}
	}
	for _, line := range readmeLines(t) {
		if !line.MatchString(out) {
			t.Errorf("the README's sample line %s is not in the output", line)
		}
	}
	if m := fullToken.FindAllString(out, -1); m != nil {
		t.Errorf("the default output prints tokens in full: %q", m)
	}
	if strings.Contains(out, `"confirmation_token"`) || strings.Contains(out, "← ") {
		t.Error("the default output holds the calls' JSON, which only --verbose prints")
	}
	if t.Failed() {
		t.Logf("output:\n%s", out)
	}
}

// readmeLines returns the sample lines of the README's "Try it" section as
// patterns: ids and tokens stand for any, and " … " for any text.
func readmeLines(t *testing.T) []*regexp.Regexp {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("..", "..", "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	_, section, _ := strings.Cut(string(data), "## Try it\n")
	section, _, _ = strings.Cut(section, "\n## ")
	_, block, ok := strings.Cut(section, "```text\n")
	block, _, ok2 := strings.Cut(block, "```")
	if !ok || !ok2 {
		t.Fatal("README.md's Try it section has no ```text block of the demo's output")
	}
	ids := regexp.MustCompile(`(chg|run|confirm|undo)_\S+?…`)
	var lines []*regexp.Regexp
	for _, l := range strings.Split(strings.TrimSpace(block), "\n") {
		p := regexp.QuoteMeta(l)
		p = ids.ReplaceAllStringFunc(p, func(s string) string { return s[:strings.IndexByte(s, '_')+1] + `[A-Za-z0-9_-]+…` })
		p = strings.ReplaceAll(p, " … ", " .* ")
		lines = append(lines, regexp.MustCompile("(?m)^"+p+"$"))
	}
	return lines
}

// TestDemoVerbose checks that --verbose adds each call and its JSON, tokens
// in full, and that the narration's shortened tokens are those tokens; and
// that with a terminal on stdin the dashboard stays up until Enter.
func TestDemoVerbose(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("builds and runs the notes server and mcp-changeset")
	}
	enter, press := io.Pipe()
	var out testkit.Buffer
	done := make(chan int, 1)
	go func() {
		done <- runMain(context.Background(), []string{"--verbose"}, &out, io.Discard, nil, func(d *demo) { d.enter = enter })
	}()
	waitFor := func(s string) {
		t.Helper()
		deadline := time.Now().Add(60 * time.Second)
		for !strings.Contains(out.String(), s) {
			select {
			case code := <-done:
				t.Fatalf("the demo ended (status %d) before printing %q:\n%s", code, s, out.String())
			case <-time.After(20 * time.Millisecond):
			}
			if time.Now().After(deadline) {
				t.Fatalf("no %q after 60s:\n%s", s, out.String())
			}
		}
	}
	waitFor("press Enter to stop it")
	select {
	case code := <-done:
		t.Fatalf("the demo ended (status %d) without waiting for Enter", code)
	case <-time.After(200 * time.Millisecond):
	}
	press.Write([]byte("\n"))
	if code := <-done; code != 0 {
		t.Fatalf("exit status %d:\n%s", code, out.String())
	}
	s := out.String()
	for _, want := range []string{
		`    → preview_write_note {"content":"buy milk\n","name":"todo.txt"}`,
		`      "writes_enabled": false`,
		`    ← refused: change chg_`,
		`"skipped": [`,
		`"status": "partially_undone"`,
		"✓ every step behaved as promised",
	} {
		if !strings.Contains(s, want) {
			t.Errorf("--verbose output lacks %q", want)
		}
	}
	// Every confirmation token the demo received, and the first undo
	// token (the one it uses), appear in the narration shortened.
	confirms := regexp.MustCompile(`"confirmation_token": "(confirm_[A-Za-z0-9_-]{20,})"`).FindAllStringSubmatch(s, -1)
	undo := regexp.MustCompile(`"undo_token": "(undo_[A-Za-z0-9_-]{20,})"`).FindStringSubmatch(s)
	if len(confirms) != 6 || undo == nil {
		t.Fatalf("--verbose shows %d confirmation tokens and undo token %v in full, want 6 and one", len(confirms), undo != nil)
	}
	for _, m := range append(confirms, undo) {
		if !regexp.MustCompile(`(?m)^✓ .*` + regexp.QuoteMeta(tok(m[1]))).MatchString(s) {
			t.Errorf("no narration line names token %s… by its shortened form %s", m[1][:8], tok(m[1]))
		}
	}
	if t.Failed() {
		t.Logf("output:\n%s", s)
	}
}

// TestDemoBrokenPromise leaves out the person's edit between a preview and
// its apply: the apply then succeeds where the demo promises a refusal, and
// the demo must say so and exit 1.
func TestDemoBrokenPromise(t *testing.T) {
	t.Parallel()
	code, out := demoRun(t, []string{"--dashboard-wait", "0"}, func(d *demo) { d.skipPersonEdit = true })
	if code != 1 {
		t.Fatalf("exit status %d, want 1:\n%s", code, out)
	}
	if !strings.Contains(out, "✗ apply_change should have been refused") || strings.Contains(out, "every step behaved") {
		t.Errorf("the output does not report the broken promise:\n%s", out)
	}
}

// TestUsage checks the command line's errors.
func TestUsage(t *testing.T) {
	for _, args := range [][]string{{"extra"}, {"--dashboard-wait", "-1s"}, {"--dashboard-wait", "soon"}, {"--no-such-flag"}} {
		var out, errs bytes.Buffer
		if code := runMain(context.Background(), args, &out, &errs, nil, nil); code != 2 {
			t.Errorf("%q: exit status %d, want 2", args, code)
		}
		if out.Len() != 0 || errs.Len() == 0 {
			t.Errorf("%q: stdout %q, stderr %q; want the error on stderr only", args, out.String(), errs.String())
		}
	}
	var out, errs bytes.Buffer
	if code := runMain(context.Background(), []string{"--help"}, &out, &errs, nil, nil); code != 0 || !strings.Contains(errs.String(), "--dashboard-wait") {
		t.Errorf("--help: exit status %d, usage %q", code, errs.String())
	}
}

// TestIsTerminal checks that neither a file nor the null device counts as
// a terminal, so that the dashboard never waits for an Enter that cannot
// come.
func TestIsTerminal(t *testing.T) {
	f, err := os.Create(filepath.Join(t.TempDir(), "f"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	null, err := os.Open(os.DevNull)
	if err != nil {
		t.Fatal(err)
	}
	defer null.Close()
	if isTerminal(f) || isTerminal(null) {
		t.Errorf("isTerminal: file %v, %s %v; want false for both", isTerminal(f), os.DevNull, isTerminal(null))
	}
}

// TestShort checks how ids and tokens are shortened.
func TestShort(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{"confirm_Y1kYF8ImHEk8Pr_1nKSp0qxx9aXxMtc3", "confirm_Y1k…"},
		{"undo_hmryaczIIa6wysQuapkpJlIxdpQhAEnA", "undo_hmr…"},
		{"chg_5ad77fe707555384b0e8", "chg_5ad7…"},
	} {
		got := tok(c.in)
		if strings.HasPrefix(c.in, "chg_") {
			got = id(c.in)
		}
		if got != c.want {
			t.Errorf("short(%q) = %q, want %q", c.in, got, c.want)
		}
	}
	if got := tok("undo_ab"); got != "undo_ab" {
		t.Errorf("tok(undo_ab) = %q, want it unchanged", got)
	}
	if got := (&demo{}).abbrev("change chg_5ad77fe707555384b0e8: run run_0cddd10fa55c89d190a7."); got != "change chg_5ad7…: run run_0cdd…." {
		t.Errorf("abbrev = %q", got)
	}
}
