package main

import (
	"context"
	"crypto/ed25519"
	"errors"
	"fmt"

	"github.com/mcp-changeset/changeset-go/checkpoint"
	"github.com/mcp-changeset/changeset-go/ledger"
)

// CheckpointCommand verifies the ledger's history and prints a signed
// statement of its newest entry (package checkpoint), made with the key
// in --key, which it creates on first use. It opens the ledger read-only.
type CheckpointCommand struct {
	main *Main

	ledger string
	key    string
	out    string
}

// Run parses args, verifies the history and signs its head.
func (c *CheckpointCommand) Run(ctx context.Context, args []string) error {
	fs := newFlagSet("checkpoint", &c.ledger)
	fs.StringVar(&c.key, "key", "", "the signing key's `file` (created, mode 0600, when missing)")
	fs.StringVar(&c.out, "out", "", "write the statement to this `file` instead of stdout")
	rest, err := parseArgs(fs, args)
	if err != nil {
		return err
	}
	if err := noArgs(rest); err != nil {
		return err
	}
	if c.key == "" {
		return usagef("--key is required: the file of the key that signs the checkpoint (created on first use)")
	}
	target, err := c.main.ledgerTarget(c.ledger)
	if err != nil {
		return err
	}
	// The ledger first: a mistyped ledger makes no key. Then the key,
	// before the whole history is read.
	l, err := openLedger(ctx, target, false, c.main.Now)
	if err != nil {
		return err
	}
	defer l.Close()
	key, created, err := checkpoint.LoadOrCreateKey(c.key)
	if err != nil {
		return errors.New(trimPackage(err))
	}
	if created {
		fmt.Fprintf(c.main.Stderr, "mcp-changeset checkpoint: created the signing key %s (mode 0600); keep it away from the ledger's writers. Its public key, for verify --public-key: %s\n",
			clean(c.key), checkpoint.FormatPublicKey(key.Public().(ed25519.PublicKey)))
	}
	progress := isTerminal(c.main.Stderr)
	opts := ledger.VerifyOptions{}
	if progress {
		opts.Progress = checkProgress(c.main.Stderr)
	}
	v, err := l.Verify(ctx, opts)
	if progress {
		fmt.Fprint(c.main.Stderr, "\r\033[K") // clear the progress line
	}
	if err != nil {
		return err
	}
	if !v.OK() {
		for _, p := range v.Problems {
			fmt.Fprintln(c.main.Stdout, clean(p))
		}
		fmt.Fprintf(c.main.Stderr, "mcp-changeset checkpoint: not signed: the history of %s does not verify (%s above): a checkpoint of it would vouch for the damage. See mcp-changeset verify and docs/security-model.md, \"When verify fails\"\n",
			l.Location(), plural(len(v.Problems), "problem"))
		return errReported
	}
	st, err := checkpoint.Sign(key, v.Head, c.main.Now())
	if errors.Is(err, checkpoint.ErrEmpty) {
		return fmt.Errorf("the history of %s is empty: there is no entry to sign yet", l.Location())
	}
	if err != nil {
		return errors.New(trimPackage(err))
	}
	data, err := st.Marshal()
	if err != nil {
		return err
	}
	if c.out == "" {
		_, err = c.main.Stdout.Write(data)
		return err
	}
	if err := checkpoint.WriteFile(c.out, data); err != nil {
		return fmt.Errorf("write the checkpoint: %w", err)
	}
	fmt.Fprintf(c.main.Stderr, "mcp-changeset checkpoint: entry %d signed into %s\n", st.Seq, clean(c.out))
	return nil
}

// trimPackage drops the "checkpoint: " that starts the package's errors:
// Main already names the command.
func trimPackage(err error) string {
	s := err.Error()
	if len(s) > len("checkpoint: ") && s[:len("checkpoint: ")] == "checkpoint: " {
		return s[len("checkpoint: "):]
	}
	return s
}

// Usage returns the help text of checkpoint.
func (c *CheckpointCommand) Usage() string {
	return `Usage: mcp-changeset checkpoint --key FILE [--out FILE]

Verify the ledger's history, as "mcp-changeset verify" does, and print a
statement of its newest entry signed with the Ed25519 key in --key:

	{
	  "seq": 1290,
	  "hash": "…",          the entry's hash, hex
	  "at": "…",            when it was signed, RFC 3339, UTC
	  "public_key": "…",    base64
	  "signature": "…"      base64
	}

Keep the statement where whoever can write the ledger cannot change it
(another host, object storage with retention, a ticket): later,
"mcp-changeset verify --checkpoint FILE --public-key KEY" fails if the
history no longer holds that entry with that hash, even when it was
rewritten into a chain that holds together. A history that does not verify
is not signed: the problems are printed and the exit status is 1.

The key file holds a PEM "PRIVATE KEY" block (PKCS #8, as openssl genpkey
-algorithm ed25519 writes). When it does not exist, it is created with a
new key, mode 0600, and the public key is printed on stderr. A key file
its group or others may read is refused: whoever reads it can sign
checkpoints.

The ledger is opened read-only; the whole history is read. On a terminal,
a progress line is written to stderr.

Exit status: 0 when the statement was printed or written; 1 when the
history does not verify or is empty, or on any error, including a usage
error.

Options:

	--key FILE   the signing key (required; created when missing)
	--out FILE   write the statement to FILE (mode 0644, whole or not at
	             all) instead of stdout
	--ledger L   the ledger (default $` + LedgerEnv + `)

Examples:

	mcp-changeset checkpoint --key /etc/notes/checkpoint.key
	mcp-changeset checkpoint --key checkpoint.key --out checkpoint.json && aws s3 cp checkpoint.json s3://audit/notes/
`
}
