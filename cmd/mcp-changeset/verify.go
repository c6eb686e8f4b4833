package main

import (
	"context"
	"crypto/ed25519"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"slices"
	"strconv"
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
	receipts    []receiptView
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
	Receipts    []receiptView    `json:"receipts"`
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
	fs.Func("receipt", "a `receipt` (SEQ:HASH, or its JSON) the history must still hold (repeatable)", func(v string) error {
		r, err := parseReceipt(v)
		if err != nil {
			return err
		}
		c.receipts = append(c.receipts, r)
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
	report, err := verifyLedger(ctx, l, views, c.receipts, !c.json && isTerminal(c.main.Stderr), c.main.Stderr)
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

// verifyLedger verifies l, in one read of the history, against each
// usable checkpoint of views and each receipt. The report's problems are
// the chain's and the rows', then each checkpoint's and each receipt's.
func verifyLedger(ctx context.Context, l *ledger.Ledger, views []checkpointView, receipts []receiptView, progress bool, stderr io.Writer) (*verifyReport, error) {
	// Each link Verify is given, with whose problems its lines become and
	// how they are headed.
	var links []ledger.Link
	var owner []*[]string
	var prefix []string
	for i := range views {
		if views[i].statement != nil {
			links = append(links, views[i].statement.Link())
			owner = append(owner, &views[i].Problems)
			prefix = append(prefix, checkpointLine(views[i].File, ""))
		}
	}
	for i := range receipts {
		links = append(links, ledger.Link{Seq: receipts[i].Seq, Hash: receipts[i].hash})
		owner = append(owner, &receipts[i].Problems)
		prefix = append(prefix, fmt.Sprintf("receipt %d: ", receipts[i].Seq))
	}
	opts := ledger.VerifyOptions{Checkpoints: links}
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
	report := &verifyReport{Problems: []string{}, Checkpoints: views, Receipts: receipts,
		Entries: v.Entries, Pruned: v.Pruned, Head: v.Head, FirstBad: v.FirstBad}
	for _, p := range v.Problems {
		if !slices.Contains(v.Checkpoints, p) {
			report.Problems = append(report.Problems, clean(p))
		}
	}
	for i, p := range v.Checkpoints {
		if p != "" {
			*owner[i] = append(*owner[i], prefix[i]+clean(p))
		}
	}
	for i := range views {
		views[i].OK = views[i].statement != nil && len(views[i].Problems) == 0
		report.Problems = append(report.Problems, views[i].Problems...)
	}
	for i := range receipts {
		receipts[i].OK = len(receipts[i].Problems) == 0
		report.Problems = append(report.Problems, receipts[i].Problems...)
	}
	report.OK = len(report.Problems) == 0
	return report, nil
}

// receiptView is one --receipt: a link an agent was given with the result
// of an apply or an undo, which the history must still hold.
type receiptView struct {
	Seq      int64    `json:"seq"`
	Hash     string   `json:"hash"`
	OK       bool     `json:"ok"`
	Problems []string `json:"problems"`

	hash ledger.Hash
}

// parseReceipt reads a --receipt value: SEQ:HASH, or the receipt's JSON
// as a result carries it ({"seq":…,"hash":"…"}).
func parseReceipt(value string) (receiptView, error) {
	var r struct {
		Seq  int64       `json:"seq"`
		Hash ledger.Hash `json:"hash"`
	}
	if strings.HasPrefix(strings.TrimSpace(value), "{") {
		if err := json.Unmarshal([]byte(value), &r); err != nil {
			return receiptView{}, usagef("not a receipt's JSON: %v", err)
		}
	} else {
		seq, hash, ok := strings.Cut(value, ":")
		n, err := strconv.ParseInt(seq, 10, 64)
		if !ok || err != nil {
			return receiptView{}, usagef("want SEQ:HASH (the receipt's seq and hash), or the receipt's JSON")
		}
		h, err := ledger.ParseHash(hash)
		if err != nil {
			return receiptView{}, usagef("%v", err)
		}
		r.Seq, r.Hash = n, h
	}
	if r.Seq <= 0 {
		return receiptView{}, usagef("a receipt's seq is 1 or more")
	}
	return receiptView{Seq: r.Seq, Hash: r.Hash.String(), Problems: []string{}, hash: r.Hash}, nil
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
		for _, rc := range r.Receipts {
			fmt.Fprintf(c.main.Stdout, "receipt %d: the entry holds its hash\n", rc.Seq)
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
	return `Usage: mcp-changeset verify [--checkpoint FILE]... [--receipt SEQ:HASH]... [--public-key KEY] [--json]

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
With --receipt, the receipt an apply or an undo returned (its seq and
hash), the history must hold that entry with that hash the same way.
Checkpoints and receipts cost a lookup each, not another read.

verify reads the whole history and every row, in one snapshot that no
writer waits for; its cost grows with the ledger. The ledger is opened
read-only. On a terminal, a progress line is written to stderr.

Exit status: 0 when the history, the rows and every checkpoint agree; 1
when a problem was found (each on a line of its own; the reason and what
to do on stderr), or on any error, including a usage error.

Options:

	--checkpoint FILE  a checkpoint the history must still hold; repeat
	                   for several
	--receipt R        a receipt the history must still hold: SEQ:HASH,
	                   or the receipt's JSON {"seq":…,"hash":"…"}; repeat
	                   for several
	--public-key KEY   the Ed25519 public key every checkpoint must be
	                   signed with: base64 (a statement's public_key), or a
	                   file holding that or a PEM "PUBLIC KEY" block
	--json             print one JSON document instead of lines
	--ledger L         the ledger (default $` + LedgerEnv + `)

Examples:

	mcp-changeset verify
	mcp-changeset verify --checkpoint /mnt/audit/checkpoint-1290.json --public-key checkpoint.pub
	mcp-changeset verify --receipt 1234:5b0c…e1a4
	mcp-changeset verify --json > verify.json || alert
`
}
