package checkpoint

import (
	"context"
	"crypto/ed25519"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/mcp-changeset/changeset-go/ledger"
)

// DefaultEvery is how often a Schedule signs a checkpoint when its Every
// is zero.
const DefaultEvery = time.Hour

// A Schedule signs a checkpoint of a ledger's history now and then, in a
// server: once when it starts, then every Every, each into a file of its
// own in Dir, checkpoint-<seq>.json (mode 0644, written whole or not at
// all). Set Key and Dir; the other fields have defaults. Run it with
// [Schedule.Run], or give it to changeset.Options.Checkpoints, which runs
// it beside the server until the Guard closes.
//
// Before it signs, a Schedule verifies the history (as [Take] does) and
// checks that it still holds the newest checkpoint in Dir signed with Key,
// so a history rewritten since the last checkpoint is refused and logged,
// not signed. When nothing was written since the last checkpoint, it signs
// nothing. It never stops on an error: it logs it and tries again at the
// next tick.
//
// The files in Dir are worth most when copied elsewhere, out of reach of
// whoever can write the ledger (docs/security-model.md).
//
// A Schedule remembers its newest checkpoint: run it from one goroutine
// at a time (changeset.Options.Checkpoints runs a copy of it).
type Schedule struct {
	// Key signs the checkpoints; [LoadOrCreateKey] reads it from a file.
	Key ed25519.PrivateKey
	// Dir receives the statements. It must exist.
	Dir string
	// Every is how long to wait between two checkpoints (default
	// DefaultEvery).
	Every time.Duration
	// Logger receives a record per checkpoint signed (seq, hash, file)
	// and per failure. Nil discards them; changeset.Options.Checkpoints
	// uses the Guard's logger.
	Logger *slog.Logger
	// Now replaces time.Now for the statements' "at" (tests);
	// changeset.Options.Checkpoints uses the Guard's clock.
	Now func() time.Time

	// last is the newest checkpoint this Schedule wrote or found in Dir.
	last *Statement
}

// Check reports what is wrong with the schedule's fields, if anything.
func (s *Schedule) Check() error {
	switch {
	case len(s.Key) != ed25519.PrivateKeySize:
		return fmt.Errorf("checkpoint: the schedule's key is %d bytes, not an Ed25519 private key (%d); read one with LoadOrCreateKey", len(s.Key), ed25519.PrivateKeySize)
	case s.Dir == "":
		return errors.New("checkpoint: the schedule needs a directory to write its checkpoints to")
	case s.Every < 0:
		return fmt.Errorf("checkpoint: the schedule's Every is negative (%s)", s.Every)
	}
	info, err := os.Stat(s.Dir)
	if err != nil {
		return fmt.Errorf("checkpoint: the schedule's directory: %w", err)
	}
	if !info.IsDir() {
		return fmt.Errorf("checkpoint: the schedule's directory %s is not a directory", s.Dir)
	}
	return nil
}

// Run signs a checkpoint of c's history at once and then every Every,
// until ctx ends; then it returns nil. It returns an error at once only
// when the schedule is not valid (see Check).
func (s *Schedule) Run(ctx context.Context, c Chain) error {
	if err := s.Check(); err != nil {
		return err
	}
	every := s.Every
	if every == 0 {
		every = DefaultEvery
	}
	s.last = s.newest()
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		s.Tick(ctx, c)
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
	}
}

// Tick signs one checkpoint of c's history and writes it to Dir, unless
// the history does not verify or nothing was written since the last
// checkpoint. It logs what it did and returns the statement it wrote
// (nil when none). Run calls it at every tick.
func (s *Schedule) Tick(ctx context.Context, c Chain) *Statement {
	log := s.logger()
	var prev ledger.Link
	if s.last != nil {
		prev = s.last.Link()
	}
	st, err := take(ctx, c, s.Key, prev, s.now())
	var broken *BrokenError
	switch {
	case ctx.Err() != nil:
		return nil
	case errors.As(err, &broken):
		v := broken.Verification
		log.Error("checkpoint not signed: the history does not verify; run mcp-changeset verify, see docs/security-model.md",
			"problems", len(v.Problems), "first", v.Problems[0], "first_bad_seq", v.FirstBad)
		return nil
	case errors.Is(err, ErrEmpty):
		log.Debug("checkpoint not signed: the history is empty")
		return nil
	case err != nil:
		log.Error("checkpoint not signed; trying again at the next tick", "err", err)
		return nil
	case s.last != nil && st.Seq == s.last.Seq:
		log.Debug("checkpoint not signed: nothing was written since the last one", "seq", st.Seq)
		return nil
	}
	file, err := s.write(st)
	if err != nil {
		log.Error("checkpoint signed but not written; trying again at the next tick", "seq", st.Seq, "err", err)
		return nil
	}
	s.last = st
	log.Info("checkpoint signed", "seq", st.Seq, "hash", st.Hash.String(), "file", file)
	return st
}

// fileName is the name of the statement of entry seq in Dir.
func fileName(seq int64) string { return "checkpoint-" + strconv.FormatInt(seq, 10) + ".json" }

// write writes the statement to Dir whole: to a temporary file first,
// synced, then renamed over its name.
func (s *Schedule) write(st *Statement) (string, error) {
	data, err := st.Marshal()
	if err != nil {
		return "", err
	}
	path := filepath.Join(s.Dir, fileName(st.Seq))
	if err := WriteFile(path, data); err != nil {
		return "", err
	}
	return path, nil
}

// WriteFile writes data to path whole or not at all, mode 0644: to a
// temporary file in the same directory, synced, then renamed over path.
// The command and a Schedule write statements with it.
func WriteFile(path string, data []byte) error {
	tmp, err := os.CreateTemp(filepath.Dir(path), ".checkpoint-*.tmp")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name()) // after the rename, removes nothing
	_, err = tmp.Write(data)
	if err == nil {
		err = tmp.Chmod(0o644)
	}
	if err == nil {
		err = tmp.Sync()
	}
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return err
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		return err
	}
	if d, err := os.Open(filepath.Dir(path)); err == nil {
		d.Sync() // the rename itself; some systems cannot sync a directory
		d.Close()
	}
	return nil
}

// newest returns the statement with the highest seq among the
// checkpoint-<seq>.json files of Dir that verify under the schedule's
// key, or nil. A file that does not verify is logged and passed over.
func (s *Schedule) newest() *Statement {
	entries, err := os.ReadDir(s.Dir)
	if err != nil {
		s.logger().Warn("checkpoint: cannot list the earlier checkpoints", "dir", s.Dir, "err", err)
		return nil
	}
	pub := s.Key.Public().(ed25519.PublicKey)
	var best *Statement
	for _, e := range entries {
		num, ok := strings.CutPrefix(e.Name(), "checkpoint-")
		num, ok2 := strings.CutSuffix(num, ".json")
		seq, err := strconv.ParseInt(num, 10, 64)
		if !ok || !ok2 || err != nil || (best != nil && seq <= best.Seq) {
			continue
		}
		path := filepath.Join(s.Dir, e.Name())
		st, err := ReadFile(path)
		if err == nil {
			err = Verify(st, pub)
		}
		if err != nil {
			s.logger().Warn("checkpoint: passing over a file that is not a checkpoint of this key", "file", path, "err", err)
			continue
		}
		best = st
	}
	return best
}

func (s *Schedule) logger() *slog.Logger {
	if s.Logger == nil {
		return slog.New(slog.DiscardHandler)
	}
	return s.Logger
}

func (s *Schedule) now() time.Time {
	if s.Now == nil {
		return time.Now()
	}
	return s.Now()
}
