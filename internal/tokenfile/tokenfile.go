// Package tokenfile reads the files that map secret tokens to names: the
// bearer tokens of an HTTP server ("TOKEN IDENTITY") and the people of a
// dashboard ("TOKEN NAME"). Both use one format and one parser, so that a
// file that works for one works for the other and both warn and fail the
// same way.
//
// The format is one "TOKEN NAME" pair per line, separated by spaces or
// tabs:
//
//	# made with: openssl rand -hex 32
//	3f0c…9a alice
//	b71e…04 bob
//
// Blank lines and lines starting with '#' are skipped. A token may appear
// once; a name may appear on several lines (one person, several devices).
//
// Only SHA-256 digests of the tokens are kept in memory, and a lookup
// compares the digest of the token presented with every entry in constant
// time, so that how long it takes says nothing about which token, or how
// much of one, matched. Errors name the file and the line, never a token.
package tokenfile

import (
	"bufio"
	"crypto/sha256"
	"crypto/subtle"
	"fmt"
	"log/slog"
	"os"
	"runtime"
	"strings"
)

// MinTokenLen is the length below which Read warns that a token is easy
// to guess.
const MinTokenLen = 16

// Format describes one use of the format, for messages and checks.
type Format struct {
	// What names the file in messages: "bearer token file", "people file".
	What string
	// Field names the second column in messages: "IDENTITY", "NAME".
	Field string
	// Check validates a name; its error completes "<file>, line N: ".
	// Nil accepts any name.
	Check func(name string) error
}

// File is a parsed token file: digests of its tokens and their names.
type File struct {
	entries []entry
}

type entry struct {
	digest [sha256.Size]byte
	name   string
	line   int
}

// Read parses the file at path in format f. log (nil discards) gets a
// warning for a token shorter than MinTokenLen and for a file that other
// users can read. The file is read once; callers that want a change to
// take effect read it again.
func Read(path string, f Format, log *slog.Logger) (*File, error) {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	fh, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", f.What, err)
	}
	defer fh.Close()
	if fi, err := fh.Stat(); err == nil && runtime.GOOS != "windows" && fi.Mode().Perm()&0o077 != 0 {
		log.Warn("the "+f.What+" can be read by other users; chmod 600 it", "file", path)
	}
	field := strings.ToLower(f.Field)
	out := &File{}
	seen := map[[sha256.Size]byte]int{}
	sc := bufio.NewScanner(fh)
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		fields := strings.Fields(line)
		if len(fields) != 2 {
			return nil, fmt.Errorf("%s %s, line %d: want \"TOKEN %s\" (two fields)", f.What, path, n, f.Field)
		}
		token, name := fields[0], fields[1]
		if f.Check != nil {
			if err := f.Check(name); err != nil {
				return nil, fmt.Errorf("%s %s, line %d: %v", f.What, path, n, err)
			}
		}
		d := sha256.Sum256([]byte(token))
		if prev, dup := seen[d]; dup {
			return nil, fmt.Errorf("%s %s, line %d: the same token is on line %d; a token may be on one line only (make another with: openssl rand -hex 32)", f.What, path, n, prev)
		}
		seen[d] = n
		if len(token) < MinTokenLen {
			log.Warn("a token in the "+f.What+" is short and easy to guess; use 32 or more random characters", "file", path, "line", n, field, name)
		}
		out.entries = append(out.entries, entry{digest: d, name: name, line: n})
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("%s %s: %w", f.What, path, err)
	}
	if len(out.entries) == 0 {
		return nil, fmt.Errorf("%s %s holds no tokens", f.What, path)
	}
	return out, nil
}

// Len is the number of tokens.
func (t *File) Len() int { return len(t.entries) }

// Lookup returns the name the token maps to, or ok=false. It hashes the
// token and compares the digest with every entry in constant time,
// stopping at none, so that its timing tells nothing about the tokens.
func (t *File) Lookup(token string) (name string, ok bool) {
	d := sha256.Sum256([]byte(token))
	for _, e := range t.entries {
		if subtle.ConstantTimeCompare(d[:], e.digest[:]) == 1 {
			name, ok = e.name, true
		}
	}
	return name, ok
}

// Shared returns the lines of t and of other that hold the same token, the
// first such pair in t's order, or ok=false when the files share none. A
// server that reads two token files (its agents' bearer tokens and the
// dashboard's people) refuses to start when they share one: whoever holds
// an agent's token could then also sign in as a person.
func (t *File) Shared(other *File) (line, otherLine int, ok bool) {
	lines := make(map[[sha256.Size]byte]int, len(other.entries))
	for _, e := range other.entries {
		lines[e.digest] = e.line
	}
	for _, e := range t.entries {
		if n, found := lines[e.digest]; found {
			return e.line, n, true
		}
	}
	return 0, 0, false
}
