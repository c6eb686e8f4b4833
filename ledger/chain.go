package ledger

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"fmt"
)

// The history is a hash chain. Every entry's Hash covers its own fields
// and the Hash of the entry before it (by Seq), so that an entry edited,
// re-timed, deleted or moved in the database no longer matches the entry
// after it, and [Ledger.Verify] names the first one that does not. The
// ledger numbers and hashes the entries when the transaction that made
// the transitions commits, after the chain's newest link and under the
// chain's lock (SQLite's one writer at a time; on PostgreSQL the lock of
// a head row, moved by one statement per entry that hashes in the
// database: driver.ChainAppender), so that Seq is the order of the chain
// on every backend. A prune deletes entries with the rows they describe but
// keeps each one's link (its Seq and Hash), and records in its own entry
// how many it deleted: the chain stays whole, and an entry deleted outside
// a prune still shows.
//
// A chain proves that nobody rewrote the history without rewriting every
// entry after the change too. Someone who can write the database can do
// that; a [Link] kept elsewhere (a signed checkpoint, see
// [VerifyOptions].Checkpoints) detects it.

// Hash is the SHA-256 hash that chains a history entry to the entries
// before it (see [HistoryHash]). It is not a secret: it prints in
// lower-case hex.
type Hash [sha256.Size]byte

// String returns the hash in lower-case hex, 64 characters.
func (h Hash) String() string { return hex.EncodeToString(h[:]) }

// IsZero reports whether h is the zero hash: the "previous hash" of the
// first entry of a chain, and the hash of an entry written before the
// chain existed and never chained.
func (h Hash) IsZero() bool { return h == Hash{} }

// MarshalText encodes the hash in hex, as String does.
func (h Hash) MarshalText() ([]byte, error) { return []byte(h.String()), nil }

// UnmarshalText decodes 64 hex characters.
func (h *Hash) UnmarshalText(text []byte) error {
	v, err := ParseHash(string(text))
	if err != nil {
		return err
	}
	*h = v
	return nil
}

// ParseHash decodes a hash written by Hash.String.
func ParseHash(s string) (Hash, error) {
	var h Hash
	if len(s) != 2*len(h) {
		return h, fmt.Errorf("a history hash is %d hex characters, not %d", 2*len(h), len(s))
	}
	if _, err := hex.Decode(h[:], []byte(s)); err != nil {
		return h, fmt.Errorf("a history hash is hex: %w", err)
	}
	return h, nil
}

// A Link is one place in the history's chain: the Seq of an entry and its
// Hash. A receipt names the link of the entry that recorded a transition,
// and a checkpoint the newest link when it was taken; a link stays in the
// ledger after a prune deletes its entry.
type Link struct {
	Seq  int64 `json:"seq"`
	Hash Hash  `json:"hash"`
}

// IsZero reports whether l names no entry (an empty history's head).
func (l Link) IsZero() bool { return l.Seq == 0 && l.Hash.IsZero() }

// HistoryHashPrefix starts the bytes of every hashed entry, so that the
// hash of an entry can be mistaken for no other hash of this or any other
// program.
const HistoryHashPrefix = "changeset-go history entry v1\x00"

// HistoryHash returns the hash of e chained to prev, the hash of the entry
// before it (the zero Hash for the first entry): the SHA-256 of
// HistoryHashPrefix, prev, Seq (8 bytes, big-endian) and HistoryFields(e).
// It covers every field of e except Hash itself.
func HistoryHash(prev Hash, e HistoryEntry) Hash {
	b := make([]byte, 0, 256)
	b = append(b, HistoryHashPrefix...)
	b = append(b, prev[:]...)
	b = binary.BigEndian.AppendUint64(b, uint64(e.Seq))
	return sha256.Sum256(append(b, HistoryFields(e)...))
}

// HistoryFields encodes the fields of e that HistoryHash hashes after
// Seq: At (Unix microseconds, as the ledger stores it, 8 bytes
// big-endian), ChangeID, RunID, ApprovalID, From, To, By and Note (each
// its length as a uvarint, then its bytes, so that no two entries encode
// alike) and Removed (a uvarint). A backend that numbers entries in the
// database hashes with it there (see driver.ChainAppender).
func HistoryFields(e HistoryEntry) []byte {
	b := make([]byte, 0, 128)
	b = binary.BigEndian.AppendUint64(b, uint64(e.At.UnixMicro()))
	for _, s := range [...]string{e.ChangeID, e.RunID, e.ApprovalID, e.From, e.To, e.By, e.Note} {
		b = binary.AppendUvarint(b, uint64(len(s)))
		b = append(b, s...)
	}
	return binary.AppendUvarint(b, uint64(e.Removed))
}

// seal writes the transaction's history entries, at its commit,
// numbered and hashed after the chain's newest link in the order the
// transaction made its transitions: through the backend's AppendChained
// where it has one, else after ChainHead. Doing it last means the chain's
// lock is the last lock a transaction takes (on PostgreSQL, where writers
// run side by side), so a transaction holding it never waits for a row
// another holds.
func (tx *Tx) seal() error {
	if len(tx.entries) == 0 {
		return nil
	}
	if a, ok := tx.b.(chainAppender); ok {
		for i := range tx.entries {
			link, err := a.AppendChained(tx.ctx, tx.tx, tx.entries[i])
			if err != nil {
				return err
			}
			tx.entries[i].Seq, tx.entries[i].Hash = link.Seq, link.Hash
		}
		return nil
	}
	head, err := tx.b.ChainHead(tx.ctx, tx.tx)
	if err != nil {
		return err
	}
	for i := range tx.entries {
		e := &tx.entries[i]
		e.Seq = head.Seq + 1
		e.Hash = HistoryHash(head.Hash, *e)
		if err := tx.b.AppendHistory(tx.ctx, tx.tx, *e); err != nil {
			return err
		}
		head = Link{Seq: e.Seq, Hash: e.Hash}
	}
	return nil
}
