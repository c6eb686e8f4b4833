// Command githublabels is an MCP server that adds and removes labels on
// GitHub issues through the GitHub REST API, with each change guarded.
//
// It shows how to guard writes to a remote API that has no transactions:
// the preview checks the repository against the operator's allowlist and
// that the issue and every label exist, then proposes the issue's whole new
// label set; Observe reads the issue's current labels, so an apply is
// refused if they changed after the preview and an undo is refused if they
// changed after the apply. Apply and Undo each set the full label set with
// one PUT. The token comes from GITHUB_TOKEN and is never logged nor shown.
//
//	GITHUB_TOKEN=... MCP_CHANGESET_WRITE_MODE=guarded \
//	  go run ./examples/githublabels --repo octo-org/hello-world
//
// Tools: preview_add_labels, preview_remove_labels, apply_change,
// undo_change, get_change_status. See --help for the flags every example
// shares.
//
// GitHub offers no compare-and-set on labels: between the state check and
// the PUT (milliseconds) a person's edit can still be overwritten.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"regexp"
	"slices"
	"strings"
	"unicode/utf8"

	changeset "github.com/mcp-changeset/changeset-go"
	_ "github.com/mcp-changeset/changeset-go/ledger/postgres" // --ledger postgres://…
	"github.com/mcp-changeset/changeset-go/serve"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

func main() {
	allow := &allowlist{}
	var apiURL string
	serve.Main(serve.Program{
		Name:     "githublabels",
		Synopsis: "--repo OWNER/NAME [--repo ...] [flags]",
		About: `An MCP server that adds and removes labels on issues of the GitHub
repositories the operator allows. Every change is previewed first and applied
only with the preview's confirmation token; an applied change can be undone
unless the issue's labels changed since. The token is read from GITHUB_TOKEN.
Tools: preview_add_labels, preview_remove_labels, apply_change, undo_change,
get_change_status.`,
		Flags: func(fs *flag.FlagSet) {
			fs.Var(allow, "repo", "allow the agent to label issues of repository `owner/name` (repeatable; at least one)")
			fs.StringVar(&apiURL, "api-url", "https://api.github.com", "the GitHub REST API's base `url`")
		},
		Check: func(serve.Flags) error {
			if len(allow.repos) == 0 {
				return errors.New("at least one --repo owner/name is required: the repositories the agent may label")
			}
			_, err := checkAPIURL(apiURL)
			return err
		},
		Setup: func(server *mcp.Server, guard *changeset.Guard, log *slog.Logger) error {
			base, err := checkAPIURL(apiURL)
			if err != nil {
				return err
			}
			token := os.Getenv("GITHUB_TOKEN")
			if token == "" {
				log.Warn("GITHUB_TOKEN is not set: GitHub will refuse label changes and limit reads")
			}
			register(guard, allow, newGitHub(base, token, log))
			return nil
		},
	})
}

// repo is an allowed repository, spelled as the operator wrote it.
type repo struct{ owner, name string }

func (r repo) String() string { return r.owner + "/" + r.name }

// path returns the API path /repos/{owner}/{name}/{parts...}.
func (r repo) path(parts ...string) string {
	return "/repos/" + r.owner + "/" + r.name + "/" + strings.Join(parts, "/")
}

// repoPattern is what GitHub allows in owner and repository names; it
// leaves nothing that a URL path would need to escape.
var repoPattern = regexp.MustCompile(`^([A-Za-z0-9][A-Za-z0-9-]{0,38})/([A-Za-z0-9._-]{1,100})$`)

func parseRepo(s string) (repo, bool) {
	m := repoPattern.FindStringSubmatch(s)
	if m == nil || m[2] == "." || m[2] == ".." {
		return repo{}, false
	}
	return repo{owner: m[1], name: m[2]}, true
}

// allowlist is the --repo flag: the repositories the agent may touch.
// GitHub's names are case-insensitive, and so is the lookup.
type allowlist struct {
	repos []repo
}

func (a *allowlist) String() string {
	if a == nil {
		return ""
	}
	var s []string
	for _, r := range a.repos {
		s = append(s, r.String())
	}
	return strings.Join(s, ",")
}

func (a *allowlist) Set(v string) error {
	r, ok := parseRepo(v)
	if !ok {
		return fmt.Errorf("%q is not owner/name", v)
	}
	if _, dup := a.lookup(v); !dup {
		a.repos = append(a.repos, r)
	}
	return nil
}

func (a *allowlist) lookup(s string) (repo, bool) {
	for _, r := range a.repos {
		if strings.EqualFold(r.String(), s) {
			return r, true
		}
	}
	return repo{}, false
}

// Limits on what one change may name.
const (
	maxLabels     = 20
	maxLabelRunes = 50 // GitHub's own limit on a label's name
)

type (
	labelsInput struct {
		Repo   string   `json:"repo" jsonschema:"the repository, owner/name; only those the server allows"`
		Issue  int      `json:"issue" jsonschema:"the issue or pull request number"`
		Labels []string `json:"labels" jsonschema:"label names; each must exist in the repository"`
	}
	// labelsPayload holds the issue's label set as the preview saw it and
	// the full set Apply will put.
	labelsPayload struct {
		Repo   string   `json:"repo"`
		Issue  int      `json:"issue"`
		Labels []string `json:"labels"`
		Before []string `json:"before"`
		After  []string `json:"after"`
	}
	// previous is what Apply replaced; Undo puts it back.
	previous struct {
		Previous []string `json:"previous"`
	}
)

func register(guard *changeset.Guard, allow *allowlist, gh *github) {
	op := func(add bool) changeset.Operation[labelsInput, labelsPayload, previous] {
		return changeset.Operation[labelsInput, labelsPayload, previous]{
			Preview: func(ctx context.Context, in labelsInput) (*changeset.Proposal[labelsPayload], error) {
				return propose(ctx, allow, gh, in, add)
			},
			Apply: func(ctx context.Context, p labelsPayload) (previous, error) {
				r, err := expect(ctx, allow, gh, p, p.Before, "the preview")
				if err != nil {
					return previous{}, err
				}
				return previous{Previous: p.Before}, gh.setLabels(ctx, r, p.Issue, p.After)
			},
			Undo: func(ctx context.Context, p labelsPayload, res previous) error {
				r, err := expect(ctx, allow, gh, p, p.After, "the change was applied")
				if err != nil {
					return err
				}
				return gh.setLabels(ctx, r, p.Issue, res.Previous)
			},
			Observe: func(ctx context.Context, p labelsPayload) (any, error) {
				r, err := allowed(allow, p.Repo)
				if err != nil {
					return nil, err
				}
				return gh.issueLabels(ctx, r, p.Issue)
			},
		}
	}
	changeset.Register(guard, &mcp.Tool{Name: "add_labels",
		Description: "Add labels to a GitHub issue or pull request. The labels must exist in the repository."}, op(true))
	changeset.Register(guard, &mcp.Tool{Name: "remove_labels",
		Description: "Remove labels from a GitHub issue or pull request."}, op(false))
}

// expect checks, right before a write, that the issue's labels are still
// want: the set the preview computed its diff from (or the apply wrote).
// The Guard's own check compares with what Observe read, which a person
// could have changed between the preview's read and Observe's.
func expect(ctx context.Context, allow *allowlist, gh *github, p labelsPayload, want []string, since string) (repo, error) {
	r, err := allowed(allow, p.Repo)
	if err != nil {
		return repo{}, err
	}
	cur, err := gh.issueLabels(ctx, r, p.Issue)
	if err != nil {
		return repo{}, err
	}
	if !slices.Equal(cur, want) {
		return repo{}, changeset.Refuse("the labels of issue %s#%d changed since %s; nothing was changed", r, p.Issue, since)
	}
	return r, nil
}

// allowed looks a repository up in the allowlist, before anything is sent
// to GitHub.
func allowed(allow *allowlist, name string) (repo, error) {
	r, ok := allow.lookup(name)
	if !ok {
		return repo{}, changeset.Refuse("repository %q is not on this server's allowlist (allowed: %s); nothing was sent to GitHub",
			name, strings.ReplaceAll(allow.String(), ",", ", "))
	}
	return r, nil
}

// propose checks an add_labels or remove_labels call against the allowlist
// and GitHub, and proposes the issue's new label set.
func propose(ctx context.Context, allow *allowlist, gh *github, in labelsInput, add bool) (*changeset.Proposal[labelsPayload], error) {
	var none changeset.Proposal[labelsPayload]
	r, err := allowed(allow, in.Repo)
	if err != nil {
		return &none, err
	}
	if in.Issue <= 0 {
		return &none, changeset.Refuse("the issue number must be positive")
	}
	if len(in.Labels) == 0 || len(in.Labels) > maxLabels {
		return &none, changeset.Refuse("name between 1 and %d labels", maxLabels)
	}
	for _, l := range in.Labels {
		if strings.TrimSpace(l) == "" || utf8.RuneCountInString(l) > maxLabelRunes {
			return &none, changeset.Refuse("label %q: a label name has 1 to %d characters", l, maxLabelRunes)
		}
	}

	before, err := gh.issueLabels(ctx, r, in.Issue)
	if err != nil {
		return &none, err
	}
	existing, err := gh.repoLabels(ctx, r)
	if err != nil {
		return &none, err
	}
	// GitHub matches label names without regard to case; use the
	// repository's own spelling.
	var labels []string
	for _, l := range in.Labels {
		i := slices.IndexFunc(existing, func(e string) bool { return strings.EqualFold(e, l) })
		if i < 0 {
			return &none, changeset.Refuse("label %q does not exist in %s; this server only uses existing labels", l, r)
		}
		if !slices.Contains(labels, existing[i]) {
			labels = append(labels, existing[i])
		}
	}

	after := slices.Clone(before)
	verb := "Remove"
	if add {
		verb = "Add"
		for _, l := range labels {
			if !slices.Contains(after, l) {
				after = append(after, l)
			}
		}
	} else {
		after = slices.DeleteFunc(after, func(l string) bool { return slices.Contains(labels, l) })
	}
	slices.Sort(after)
	if slices.Equal(before, after) {
		if add {
			return &none, changeset.Refuse("issue %s#%d already has these labels; nothing to change", r, in.Issue)
		}
		return &none, changeset.Refuse("issue %s#%d has none of these labels; nothing to change", r, in.Issue)
	}
	return &changeset.Proposal[labelsPayload]{
		Payload: labelsPayload{Repo: r.String(), Issue: in.Issue, Labels: labels, Before: before, After: after},
		Diff:    changeset.DiffFields(map[string]any{"labels": before}, map[string]any{"labels": after}),
		Summary: fmt.Sprintf("%s %s on %s#%d", verb, quoteAll(labels), r, in.Issue),
		// The resource is the issue's label set, which every change here
		// replaces as a whole.
		Resource: fmt.Sprintf("issue:%s#%d", r, in.Issue),
	}, nil
}

// quoteAll quotes each label for a summary (see changeset.Quote).
func quoteAll(labels []string) string {
	quoted := make([]string, len(labels))
	for i, l := range labels {
		quoted[i] = changeset.Quote(l)
	}
	return strings.Join(quoted, ", ")
}
