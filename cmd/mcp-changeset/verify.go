package main

import (
	"cmp"
	"context"
	"crypto/ed25519"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/mcp-changeset/changeset-go/checkpoint"
	"github.com/mcp-changeset/changeset-go/ledger"
)

// VerifyCommand checks that the ledger's history is the hash chain the
// ledger wrote, that every change and run agrees with its last entry, and
// that the history still holds each checkpoint given with --checkpoint.
// It opens the ledger read-only and reads all of the history.
type VerifyCommand struct {
	main *Main

	ledger      string
	checkpoints []string
	publicKey   string
	json        bool
}

// verifyReport is the JSON document of verify --json. Its field names
// are part of the command's contract (docs/cli.md).
type verifyReport struct {
	OK          bool             `json:"ok"`
	Entries     int              `json:"entries"`
	Pruned      int              `json:"pruned"`
	Head        ledger.Link      `json:"head"`
	FirstBad    int64            `json:"first_bad"`
	Problems    []string         `json:"problems"`
	Checkpoints []checkpointView `json:"checkpoints"`
}

// checkpointView is what verify found of one --checkpoint file.
type checkpointView struct {
	File string `json:"file"`
	// Seq, Hash, At and PublicKey are the statement's, when it could be
	// read (zero otherwise).
	Seq       int64    `json:"seq"`
	Hash      string   `json:"hash"`
	At        jsonTime `json:"at"`
	PublicKey string   `json:"public_key"`
	// Trusted: the statement names the key of --public-key.
	Trusted bool `json:"trusted"`
	// OK: the signature verifies, and the history holds the entry.
	OK bool `json:"ok"`
	// Problems says what is wrong with the statement or the history
	// against it; also in the report's problems.
	Problems []string `json:"problems"`

	statement *checkpoint.Statement // nil when it could not be used
}

// Run parses args and verifies the ledger.
func (c *VerifyCommand) Run(ctx context.Context, args []string) error {
	fs := newFlagSet("verify", &c.ledger)
	fs.Func("checkpoint", "a checkpoint `file` the history must still hold (repeatable)", func(v string) error {
		c.checkpoints = append(c.checkpoints, v)
		return nil
	})
	fs.StringVar(&c.publicKey, "public-key", "", "the key every checkpoint must be signed with: a `file`, or the key in base64")
	fs.BoolVar(&c.json, "json", false, "print one JSON document")
	rest, err := parseArgs(fs, args)
	if err != nil {
		return err
	}
	if err := noArgs(rest); err != nil {
		return err
	}
	if c.publicKey != "" && len(c.checkpoints) == 0 {
		return usagef("--public-key checks the signatures of --checkpoint files; give at least one")
	}
	trusted, err := readPublicKey(c.publicKey)
	if err != nil {
		return err
	}
	views := make([]checkpointView, len(c.checkpoints))
	for i, file := range c.checkpoints {
		views[i] = readCheckpoint(file, trusted)
	}
	if len(c.checkpoints) > 0 && trusted == nil && !c.json {
		fmt.Fprintln(c.main.Stderr, "mcp-changeset verify: no --public-key: each checkpoint is checked against the key it names itself, which proves only that it is whole; give --public-key to know it is yours")
	}
	l, err := c.main.open(ctx, c.ledger, false)
	if err != nil {
		return err
	}
	defer l.Close()
	report, err := verifyLedger(ctx, l, views, !c.json && isTerminal(c.main.Stderr), c.main.Stderr)
	if err != nil {
		return err
	}
	return c.print(l.Location(), report)
}

// readPublicKey reads --public-key: the key itself in base64 (or PEM), or
// a file that holds it. nil when value is empty.
func readPublicKey(value string) (ed25519.PublicKey, error) {
	if value == "" {
		return nil, nil
	}
	if pub, err := checkpoint.ParsePublicKey(value); err == nil {
		return pub, nil
	}
	data, err := os.ReadFile(value)
	if err != nil {
		return nil, usagef("--public-key %q is neither an Ed25519 public key in base64 nor a file: %v", value, err)
	}
	pub, err := checkpoint.ParsePublicKey(string(data))
	if err != nil {
		return nil, fmt.Errorf("--public-key %s: %w", value, err)
	}
	return pub, nil
}

// readCheckpoint reads and checks the statement in file. A statement that
// cannot be read or whose signature does not verify (under trusted, when
// set) gets a problem and no statement: it says nothing about the
// history.
func readCheckpoint(file string, trusted ed25519.PublicKey) checkpointView {
	v := checkpointView{File: file, Problems: []string{}}
	st, err := checkpoint.ReadFile(file)
	if err != nil {
		v.Problems = append(v.Problems, checkpointLine(file, strings.TrimPrefix(err.Error(), "checkpoint: ")))
		return v
	}
	v.Seq, v.Hash, v.At, v.PublicKey = st.Seq, st.Hash.String(), jsonTime(st.At), checkpoint.FormatPublicKey(st.PublicKey)
	v.Trusted = trusted != nil && st.PublicKey.Equal(trusted)
	if err := checkpoint.Verify(st, trusted); err != nil {
		v.Problems = append(v.Problems, checkpointLine(file, strings.TrimPrefix(err.Error(), "checkpoint: ")))
		return v
	}
	v.statement = st
	return v
}

// checkpointLine is a problem with the checkpoint in file.
func checkpointLine(file, problem string) string {
	return "checkpoint " + clean(file) + ": " + problem
}

// verifyLedger verifies l against each usable checkpoint of views, the
// newest first: one read of the history each (one in all without a
// checkpoint). The report's problems are the chain's and the rows' (from
// the first read), then each checkpoint's.
func verifyLedger(ctx context.Context, l *ledger.Ledger, views []checkpointView, progress bool, stderr io.Writer) (*verifyReport, error) {
	order := make([]int, 0, len(views))
	for i, v := range views {
		if v.statement != nil {
			order = append(order, i)
		}
	}
	slices.SortStableFunc(order, func(a, b int) int { return cmp.Compare(views[b].Seq, views[a].Seq) })
	links := []ledger.Link{{}} // no checkpoint: one read all the same
	if len(order) > 0 {
		links = links[:0]
		for _, i := range order {
			links = append(links, views[i].statement.Link())
		}
	}
	report := &verifyReport{Problems: []string{}, Checkpoints: views}
	for n, link := range links {
		opts := ledger.VerifyOptions{Checkpoint: link}
		if progress {
			opts.Progress = checkProgress(stderr)
		}
		v, err := l.Verify(ctx, opts)
		if progress {
			fmt.Fprint(stderr, "\r\033[K") // clear the progress line
		}
		if err != nil {
			return nil, err
		}
		own := checkpointProblems(v.Problems)
		if n == 0 {
			report.Entries, report.Pruned, report.Head, report.FirstBad = v.Entries, v.Pruned, v.Head, v.FirstBad
			for _, p := range v.Problems {
				if !slices.Contains(own, p) {
					report.Problems = append(report.Problems, clean(p))
				}
			}
		}
		if len(order) > 0 {
			cv := &views[order[n]]
			for _, p := range own {
				cv.Problems = append(cv.Problems, checkpointLine(cv.File, p))
			}
		}
	}
	for i := range views {
		views[i].OK = views[i].statement != nil && len(views[i].Problems) == 0
		report.Problems = append(report.Problems, views[i].Problems...)
	}
	report.OK = len(report.Problems) == 0
	return report, nil
}

// checkpointProblems picks the lines of ledger.Verify that are about its
// checkpoint: each of them, and no other, speaks of "the checkpoint's"
// entry or hash.
func checkpointProblems(problems []string) []string {
	var out []string
	for _, p := range problems {
		if strings.Contains(p, "the checkpoint's") {
			out = append(out, p)
		}
	}
	return out
}

// print writes the report and returns errReported when it found problems.
func (c *VerifyCommand) print(location string, r *verifyReport) error {
	if c.json {
		if err := writeJSON(c.main.Stdout, r); err != nil {
			return err
		}
	} else if r.OK {
		fmt.Fprintf(c.main.Stdout, "ok: %s and %s chain, and every change and run agrees with its history\n",
			countOf(r.Entries, "entry", "entries"), countOf(r.Pruned, "link of a pruned entry", "links of pruned entries"))
		if r.Head.IsZero() {
			fmt.Fprintln(c.main.Stdout, "head: none (the history is empty)")
		} else {
			fmt.Fprintf(c.main.Stdout, "head: entry %d %s\n", r.Head.Seq, r.Head.Hash)
		}
		for _, v := range r.Checkpoints {
			key := "its own key " + v.PublicKey
			if v.Trusted {
				key = "the --public-key"
			}
			fmt.Fprintf(c.main.Stdout, "checkpoint %s: entry %d holds its hash (signed %s by %s)\n",
				clean(v.File), v.Seq, time.Time(v.At).UTC().Format(time.RFC3339), key)
		}
	} else {
		for _, p := range r.Problems {
			fmt.Fprintln(c.main.Stdout, p)
		}
	}
	if r.OK {
		return nil
	}
	first := ""
	if r.FirstBad != 0 {
		first = fmt.Sprintf("; the first entry that does not chain is %d", r.FirstBad)
	}
	fmt.Fprintf(c.main.Stderr, "mcp-changeset verify: %s found in %s%s. Stop the writers and keep a copy of the ledger as it is; compare it with a backup and the newest checkpoint that holds, and read the entries named with mcp-changeset log (docs/security-model.md, \"When verify fails\")\n",
		plural(len(r.Problems), "problem"), location, first)
	return errReported
}

// Usage returns the help text of verify.
func (c *VerifyCommand) Usage() string {
	return `Usage: mcp-changeset verify [--checkpoint FILE]... [--public-key KEY] [--json]

Verify the ledger's history: every entry is hashed again from its fields
and the hash of the entry before it, and must match the hash it carries;
the links a prune kept of the entries it deleted must be where they were,
as many as the prune entries record; and every change and run must be in
the status its last entry reached. An entry edited, re-timed, deleted or
moved in the database breaks the chain there: verify names the first
entry that does not chain, first, then every other problem.

A chain that holds together can still have been rewritten whole, by
someone who can write the database and hashed every entry again. A
checkpoint tells: a statement, signed with a key kept away from the ledger,
that entry N had hash H (see "mcp-changeset checkpoint"). With
--checkpoint FILE, the history must still hold that entry with that hash,
or the link a prune kept of it. Give --public-key, the key you sign your
checkpoints with, so that a statement signed with any other key fails:
without it, a statement is only checked against the key it names itself.
Each checkpoint costs one more read of the history.

verify reads the whole history and every row, in one snapshot that no
writer waits for; its cost grows with the ledger. The ledger is opened
read-only. On a terminal, a progress line is written to stderr.

Exit status: 0 when the history, the rows and every checkpoint agree; 1
when a problem was found (each on a line of its own; the reason and what
to do on stderr), or on any error, including a usage error.

Options:

	--checkpoint FILE  a checkpoint the history must still hold; repeat
	                   for several
	--public-key KEY   the Ed25519 public key every checkpoint must be
	                   signed with: base64 (a statement's public_key), or a
	                   file holding that or a PEM "PUBLIC KEY" block
	--json             print one JSON document instead of lines
	--ledger L         the ledger (default $` + LedgerEnv + `)

Examples:

	mcp-changeset verify
	mcp-changeset verify --checkpoint /mnt/audit/checkpoint-1290.json --public-key checkpoint.pub
	mcp-changeset verify --json > verify.json || alert
`
}
