package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// TestCompletion_ScriptsParse: each shell accepts its script (bash -n
// always; zsh -n and fish --no-execute where installed).
func TestCompletion_ScriptsParse(t *testing.T) {
	t.Parallel()
	for _, sh := range []struct{ shell, bin string }{{"bash", "bash"}, {"zsh", "zsh"}, {"fish", "fish"}} {
		r := run(t, nil, "completion", sh.shell)
		want(t, r, exitOK)
		if !strings.Contains(r.stdout, "mcp-changeset") || !strings.Contains(r.stdout, "older-than") {
			t.Errorf("%s script lacks the commands' flags:\n%s", sh.shell, r.stdout)
		}
		bin, err := exec.LookPath(sh.bin)
		if err != nil {
			if sh.shell == "bash" {
				t.Fatal("bash is not installed")
			}
			t.Logf("%s not installed: its script is not parsed", sh.bin)
			continue
		}
		check := []string{"-n"}
		if sh.shell == "fish" {
			check = []string{"--no-execute"}
		}
		script := filepath.Join(t.TempDir(), "completion")
		if err := os.WriteFile(script, []byte(r.stdout), 0o644); err != nil {
			t.Fatal(err)
		}
		if out, err := exec.Command(bin, append(check, script)...).CombinedOutput(); err != nil {
			t.Errorf("%s rejects its completion script: %v\n%s", sh.bin, err, out)
		}
	}
	wantErr(t, run(t, nil, "completion", "powershell"), `unknown shell "powershell"`)
	wantErr(t, run(t, nil, "completion"), "exactly one shell")
}

// TestCompletion_BashCompletes runs the bash script's function as bash
// would on a Tab, for commands, flags, statuses and shells.
func TestCompletion_BashCompletes(t *testing.T) {
	t.Parallel()
	r := run(t, nil, "completion", "bash")
	want(t, r, exitOK)
	script := filepath.Join(t.TempDir(), "completion.bash")
	if err := os.WriteFile(script, []byte(r.stdout), 0o644); err != nil {
		t.Fatal(err)
	}
	complete := func(words ...string) []string {
		t.Helper()
		// COMP_WORDS is the line, the cursor on its last word.
		quoted := make([]string, len(words))
		for i, w := range words {
			quoted[i] = "'" + w + "'"
		}
		prog := "source " + script + "; COMP_WORDS=(" + strings.Join(quoted, " ") + "); COMP_CWORD=" +
			strconv.Itoa(len(words)-1) + "; _mcp_changeset; printf '%s\\n' \"${COMPREPLY[@]}\""
		out, err := exec.Command("bash", "-c", prog).CombinedOutput()
		if err != nil {
			t.Fatalf("bash: %v\n%s", err, out)
		}
		return strings.Fields(string(out))
	}
	for _, tc := range []struct {
		words []string
		want  []string
	}{
		{[]string{"mcp-changeset", "l"}, []string{"list", "log"}},
		{[]string{"mcp-changeset", "pr"}, []string{"prune"}},
		{[]string{"mcp-changeset", "--ledger", "x.db", "ru"}, []string{"runs"}},
		{[]string{"mcp-changeset", "list", "--s"}, []string{"--since", "--status"}},
		{[]string{"mcp-changeset", "list", "--status", "appl"}, []string{"applied", "applying", "apply_failed"}},
		{[]string{"mcp-changeset", "prune", "--older"}, []string{"--older-than", "--older-than-days"}},
		{[]string{"mcp-changeset", "completion", "z"}, []string{"zsh"}},
		{[]string{"mcp-changeset", "help", "ch"}, []string{"check", "checkpoint"}},
	} {
		got := complete(tc.words...)
		slices.Sort(got)
		slices.Sort(tc.want)
		if !slices.Equal(got, tc.want) {
			t.Errorf("complete %q = %v, want %v", tc.words, got, tc.want)
		}
	}
}

// TestCompletion_ListsWhatTheCommandsTake: the spec has every command, and
// every flag it completes is one the command accepts.
func TestCompletion_ListsWhatTheCommandsTake(t *testing.T) {
	t.Parallel()
	m := &Main{}
	spec := m.completionSpec()
	var names []string
	for _, c := range spec.commands {
		names = append(names, c.name)
		if c.name != "help" && m.command(c.name) == nil {
			t.Errorf("completion offers %q, which is no command", c.name)
		}
		for _, f := range c.flags {
			r := run(t, nil, c.name, "--"+f.name+"=1")
			if strings.Contains(r.stderr, "flag provided but not defined") {
				t.Errorf("completion offers %s --%s, which %s does not take", c.name, f.name, c.name)
			}
		}
	}
	for _, want := range []string{"list", "show", "runs", "log", "reconcile", "prune", "expire", "check", "approvals", "approve", "decline", "version", "completion", "help"} {
		if !slices.Contains(names, want) {
			t.Errorf("completion lacks the command %s (has %v)", want, names)
		}
	}
	flags := map[string][]string{}
	for _, c := range spec.commands {
		for _, f := range c.flags {
			flags[c.name] = append(flags[c.name], f.name)
		}
	}
	for cmd, want := range map[string][]string{
		"list": {"action", "by", "json", "ledger", "limit", "run", "since", "status"}, "runs": {"json", "ledger", "limit", "since"},
		"approvals": {"json", "ledger", "limit"}, "approve": {"as", "ledger", "note", "yes"}, "decline": {"as", "ledger", "note", "yes"},
		"prune": {"include-applied", "json", "keep", "ledger", "older-than", "older-than-days", "vacuum", "yes"},
	} {
		if !slices.Equal(flags[cmd], want) {
			t.Errorf("completion of %s flags = %v, want %v", cmd, flags[cmd], want)
		}
	}
}
