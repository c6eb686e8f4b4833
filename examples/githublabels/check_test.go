package main

import (
	"log/slog"
	"slices"
	"testing"

	changeset "github.com/mcp-changeset/changeset-go"
	"github.com/mcp-changeset/changeset-go/changesettest"
)

// TestCheckOperation_Labels checks add_labels and remove_labels in
// process, registered by the example's own register function with a
// client of the fake GitHub on loopback (fake_test.go).
func TestCheckOperation_Labels(t *testing.T) {
	gh := newFakeGitHub(t)
	gh.addRepo("octo/hello", []string{"bug", "enhancement", "docs", "good first issue", "help wanted"},
		map[int][]string{1: {"bug"}, 2: {}, 3: {"docs", "help wanted"}})
	base, err := checkAPIURL(gh.srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	allow := &allowlist{}
	if err := allow.Set("octo/hello"); err != nil {
		t.Fatal(err)
	}

	g := changesettest.NewGuard(t, changeset.Options{})
	register(g.Guard, allow, newGitHub(base, fakeToken, slog.New(slog.DiscardHandler)))

	changesettest.CheckOperation(t, g, "add_labels",
		labelsInput{Repo: "octo/hello", Issue: 1, Labels: []string{"enhancement"}},
		labelsInput{Repo: "octo/hello", Issue: 2, Labels: []string{"bug", "docs"}},
		labelsInput{Repo: "OCTO/Hello", Issue: 3, Labels: []string{"Good First Issue", "docs"}}, // GitHub's case-insensitive names
	)
	changesettest.CheckOperation(t, g, "remove_labels",
		labelsInput{Repo: "octo/hello", Issue: 1, Labels: []string{"bug"}},
		labelsInput{Repo: "octo/hello", Issue: 3, Labels: []string{"help wanted", "enhancement"}},
		labelsInput{Repo: "octo/hello", Issue: 3, Labels: []string{"docs", "help wanted"}},
	)

	for key, want := range map[string][]string{"octo/hello#1": {"bug"}, "octo/hello#2": {}, "octo/hello#3": {"docs", "help wanted"}} {
		if got := gh.issue(key); !slices.Equal(got, want) {
			t.Errorf("after the checks %s has labels %v, want %v", key, got, want)
		}
	}
}
