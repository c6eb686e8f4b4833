package main

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"slices"
	"strings"
	"sync"
	"syscall"
	"unicode"
	"unicode/utf8"

	changeset "github.com/mcp-changeset/changeset-go"
)

// Limits on names and contents.
const (
	maxNameBytes    = 128
	maxContentBytes = 32 << 10 // what a write may hold, and the largest note an op will replace or delete
	maxReadBytes    = 1 << 20  // the largest note read_note returns
)

// checkName refuses every name that is not a plain file name in the notes
// directory: separators, "..", hidden names (which also keeps the
// server's temporary files apart), control and invisible characters,
// invalid UTF-8 and overlong names.
func checkName(name string) error {
	switch {
	case name == "":
		return changeset.Refuse("the note name is empty")
	case !utf8.ValidString(name):
		return changeset.Refuse("the note name is not valid UTF-8")
	case len(name) > maxNameBytes:
		return changeset.Refuse("the note name is %d bytes; at most %d are allowed", len(name), maxNameBytes)
	case strings.ContainsAny(name, `/\`):
		return changeset.Refuse("the note name %q holds a path separator; a note name is a plain file name, e.g. \"todo.txt\"", name)
	case strings.Contains(name, ".."):
		return changeset.Refuse("the note name %q holds \"..\"; a note name is a plain file name", name)
	case strings.HasPrefix(name, "."):
		return changeset.Refuse("the note name %q starts with a dot; hidden files are not notes", name)
	}
	for _, r := range name {
		if unicode.IsControl(r) || unicode.Is(unicode.Cf, r) {
			return changeset.Refuse("the note name %q holds a control or invisible character (%U)", name, r)
		}
	}
	return nil
}

// noteState is what Observe reports about a name: nil when nothing is
// there, else whether it is a regular file with the given content hash or
// something else (Kind), which no operation touches.
type noteState struct {
	Exists bool   `json:"exists"`
	SHA256 string `json:"sha256,omitempty"`
	Kind   string `json:"kind,omitempty"` // for what is not a regular file: "symlink", "directory", "fifo", "socket", "device" or "other"
	size   int64  // of the bytes hashed; not part of the observed state
}

// notFile is returned for a name that exists but is not a regular file.
// kind is one of kindOf's names.
type notFile struct {
	name, kind string
}

func (e *notFile) Error() string {
	switch e.kind {
	case "symlink":
		return fmt.Sprintf("%q is a symbolic link; this server never follows links", e.name)
	case "fifo":
		return fmt.Sprintf("%q is a named pipe (FIFO), not a regular file", e.name)
	case "device", "socket", "directory":
		return fmt.Sprintf("%q is a %s, not a regular file", e.name, e.kind)
	}
	return fmt.Sprintf("%q is not a regular file", e.name)
}

// tooLarge is returned for a note over a read limit.
type tooLarge struct {
	name        string
	size, limit int64
}

func (e *tooLarge) Error() string {
	return fmt.Sprintf("%q is %d bytes, over the limit of %d", e.name, e.size, e.limit)
}

// store keeps the notes as files in one directory. Every access goes
// through an os.Root, so that no name can reach outside it, and never
// follows a symbolic link or touches anything but a regular file: see
// openNote.
type store struct {
	root *os.Root
	// mu serialises this process's writes, so that a write's
	// compare-and-swap on the content hash cannot interleave with another.
	mu sync.Mutex
}

// kindOf names what a file mode is, "" for a regular file. The names
// appear in the state Observe reports.
func kindOf(m fs.FileMode) string {
	switch {
	case m.IsRegular():
		return ""
	case m&fs.ModeSymlink != 0:
		return "symlink"
	case m.IsDir():
		return "directory"
	case m&fs.ModeNamedPipe != 0:
		return "fifo"
	case m&fs.ModeSocket != 0:
		return "socket"
	case m&fs.ModeDevice != 0:
		return "device"
	}
	return "other"
}

// openNote opens the note name for reading. It returns an error matching
// fs.ErrNotExist when nothing is there and a *notFile for anything but a
// regular file, and it never blocks on what it finds:
//
//   - It looks first (Lstat) and refuses anything but a regular file
//     without opening it: opening a device can have effects of its own.
//   - Whatever is at the name by the time of the open (another process may
//     swap a FIFO in after the look) is opened with O_NONBLOCK. A plain
//     open of a FIFO for reading waits for a writer, which may never come,
//     and with it the tool call, the apply holding the write lock, and
//     every later write.
//   - The open file is checked with Fstat: it must be a regular file, and
//     the very file the look saw, since os.Root follows a symbolic link
//     that stays inside the root (O_NOFOLLOW alone would not refuse it).
//   - Only then is O_NONBLOCK cleared, so that the file reads as any other.
func (s *store) openNote(name string) (*os.File, fs.FileInfo, error) {
	seen, err := s.root.Lstat(name)
	if err != nil {
		return nil, nil, err
	}
	if k := kindOf(seen.Mode()); k != "" {
		return nil, nil, &notFile{name, k}
	}
	return s.openSeen(name, seen)
}

// openSeen is openNote after the look: it opens name without blocking and
// checks that the open file is the regular file seen.
func (s *store) openSeen(name string, seen fs.FileInfo) (*os.File, fs.FileInfo, error) {
	f, err := s.root.OpenFile(name, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		// A socket cannot be opened at all, a link may point outside the
		// root: say what is there now.
		if now, lerr := s.root.Lstat(name); lerr == nil && kindOf(now.Mode()) != "" {
			return nil, nil, &notFile{name, kindOf(now.Mode())}
		}
		return nil, nil, err
	}
	opened, err := f.Stat()
	switch {
	case err != nil:
		f.Close()
		return nil, nil, err
	case !os.SameFile(seen, opened) && kindOf(opened.Mode()) == "":
		// A regular file, but not the one seen: the name became a link
		// (or was replaced) between the look and the open.
		f.Close()
		return nil, nil, &notFile{name, "symlink"}
	case kindOf(opened.Mode()) != "":
		f.Close()
		kind := kindOf(opened.Mode())
		if now, lerr := s.root.Lstat(name); lerr == nil && now.Mode()&fs.ModeSymlink != 0 {
			kind = "symlink" // a link to a FIFO, say: the link is what is wrong
		}
		return nil, nil, &notFile{name, kind}
	}
	if err := clearNonblock(f); err != nil {
		f.Close()
		return nil, nil, err
	}
	return f, opened, nil
}

// read returns the content of a regular file of at most limit bytes. It
// returns an error matching fs.ErrNotExist when nothing is there, a
// *notFile for anything but a regular file, a *tooLarge past limit.
func (s *store) read(name string, limit int64) ([]byte, fs.FileInfo, error) {
	f, opened, err := s.openNote(name)
	if err != nil {
		return nil, nil, err
	}
	defer f.Close()
	if opened.Size() > limit {
		return nil, nil, &tooLarge{name, opened.Size(), limit}
	}
	data, err := io.ReadAll(io.LimitReader(f, limit+1))
	if err != nil {
		return nil, nil, err
	}
	if int64(len(data)) > limit {
		return nil, nil, &tooLarge{name, int64(len(data)), limit}
	}
	return data, opened, nil
}

func digest(data []byte) string {
	sum := sha256.Sum256(data)
	return hex.EncodeToString(sum[:])
}

// observe reports the state of name without following links or opening
// anything but a regular file (see openNote).
func (s *store) observe(name string) (*noteState, error) {
	f, _, err := s.openNote(name)
	var nf *notFile
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return nil, nil
	case errors.As(err, &nf):
		return &noteState{Exists: true, Kind: nf.kind}, nil
	case err != nil:
		return nil, err
	}
	defer f.Close()
	h := sha256.New()
	n, err := io.Copy(h, f)
	if err != nil {
		return nil, err
	}
	return &noteState{Exists: true, SHA256: hex.EncodeToString(h.Sum(nil)), size: n}, nil
}

// current reads a note for an operation: its content, or existed false. It
// refuses what an operation must not touch.
func (s *store) current(name string) (content []byte, existed bool, err error) {
	data, _, err := s.read(name, maxContentBytes)
	var nf *notFile
	var tl *tooLarge
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return nil, false, nil
	case errors.As(err, &nf):
		return nil, false, changeset.Refuse("the note %s; nothing was done", nf.Error())
	case errors.As(err, &tl):
		return nil, false, changeset.Refuse("the note %s bytes that this server edits; nothing was done", tl.Error())
	case err != nil:
		return nil, false, err
	}
	if !utf8.Valid(data) {
		return nil, false, changeset.Refuse("the note %q holds bytes that are not UTF-8 text; this server edits only text notes", name)
	}
	return data, true, nil
}

// lockFile is the notes directory's lock file (see lockNotes); its name
// starts with a dot, so it is never a note.
const lockFile = ".notes.lock"

// compareAndSwap checks, under s.mu and the directory's lock file (which
// other processes serving the directory take too), that name holds the
// content with hash want ("" for no file), then calls write. It returns
// what was there.
func (s *store) compareAndSwap(name, want string, write func(existed bool) error) (previous []byte, existed bool, err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	unlock, err := s.lockNotes()
	if err != nil {
		return nil, false, err
	}
	defer unlock()
	// Checked explicitly, although the Guard's state check has already
	// compared Observe: a link swapped in must never be written through.
	if fi, err := s.root.Lstat(name); err == nil && !fi.Mode().IsRegular() {
		return nil, false, changeset.Refuse("the note %s; nothing was written", (&notFile{name, kindOf(fi.Mode())}).Error())
	}
	previous, existed, err = s.current(name)
	if err != nil {
		return nil, false, err
	}
	got := ""
	if existed {
		got = digest(previous)
	}
	if got != want {
		return nil, false, changeset.Refuse("the note %q changed since the preview; nothing was written", name)
	}
	return previous, existed, write(existed)
}

// writeFile replaces name with data atomically: a temporary file in the
// same directory, written and synced, is renamed over name, and the
// directory is synced. A rename replaces a link itself, never its target.
func (s *store) writeFile(name string, data []byte) error {
	perm := fs.FileMode(0o644)
	if fi, err := s.root.Lstat(name); err == nil && fi.Mode().IsRegular() {
		perm = fi.Mode().Perm()
	}
	var rnd [6]byte
	rand.Read(rnd[:])
	tmp := "." + name + ".tmp-" + hex.EncodeToString(rnd[:])
	f, err := s.root.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_EXCL, perm)
	if err != nil {
		return err
	}
	_, err = f.Write(data)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = s.root.Rename(tmp, name)
	}
	if err != nil {
		s.root.Remove(tmp)
		return err
	}
	return s.syncDir()
}

// remove deletes name and syncs the directory.
func (s *store) remove(name string) error {
	if err := s.root.Remove(name); err != nil {
		return err
	}
	return s.syncDir()
}

// syncDir makes a rename or removal durable.
func (s *store) syncDir() error {
	d, err := s.root.Open(".")
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}

// noteInfo is one entry of list_notes.
type noteInfo struct {
	Name   string `json:"name"`
	Size   int64  `json:"size"`
	SHA256 string `json:"sha256"`
}

// list returns the notes, sorted by name: the regular files whose names
// are valid note names.
func (s *store) list() ([]noteInfo, error) {
	d, err := s.root.Open(".")
	if err != nil {
		return nil, err
	}
	entries, err := d.ReadDir(-1) // in the directory's order
	d.Close()
	if err != nil {
		return nil, err
	}
	slices.SortFunc(entries, func(a, b fs.DirEntry) int { return strings.Compare(a.Name(), b.Name()) })
	notes := []noteInfo{}
	for _, e := range entries {
		if !e.Type().IsRegular() || checkName(e.Name()) != nil {
			continue
		}
		st, err := s.observe(e.Name())
		if err != nil || st == nil || st.Kind != "" {
			continue // gone or replaced while listing
		}
		notes = append(notes, noteInfo{Name: e.Name(), Size: st.size, SHA256: st.SHA256})
	}
	return notes, nil
}
