package main

import (
	"errors"
	"net"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"
)

// within runs f and fails the test if it takes a second or more: nothing
// the store does may wait on what it finds in the directory. A call that
// hangs is left behind (release unblocks it when the test ends).
func within(t *testing.T, what string, f func()) {
	t.Helper()
	done := make(chan struct{})
	go func() {
		defer close(done)
		f()
	}()
	select {
	case <-done:
	case <-time.After(time.Second):
		t.Fatalf("%s did not return within a second", what)
	}
}

// mkfifo makes a FIFO at path. When the test ends it opens the FIFO for
// writing, which releases a reader a broken store left blocked in open.
func mkfifo(t *testing.T, path string) {
	t.Helper()
	if err := syscall.Mkfifo(path, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if f, err := os.OpenFile(path, os.O_WRONLY|syscall.O_NONBLOCK, 0); err == nil {
			f.Close()
		}
	})
}

// mkzero makes a device node like /dev/zero at path, or skips the test
// where the process may not.
func mkzero(t *testing.T, path string) {
	t.Helper()
	if err := syscall.Mknod(path, syscall.S_IFCHR|0o644, 1<<8|5); err != nil {
		t.Skipf("cannot make a device node here: %v", err)
	}
}

func wantKind(t *testing.T, err error, kind string) {
	t.Helper()
	var nf *notFile
	if !errors.As(err, &nf) || nf.kind != kind {
		t.Fatalf("err = %v, want a refusal naming a %s", err, kind)
	}
}

// The race openNote guards against: the name held a regular file when it
// was looked at, and something else by the time it is opened.
func TestOpenSeen_WhatIsSwappedInAfterTheLookIsRefusedAtOnce(t *testing.T) {
	for _, tc := range []struct {
		kind string
		make func(t *testing.T, path string)
	}{
		{"fifo", mkfifo},
		{"device", mkzero},
		{"symlink", func(t *testing.T, path string) {
			if err := os.Symlink("other.txt", path); err != nil {
				t.Fatal(err)
			}
		}},
	} {
		t.Run(tc.kind, func(t *testing.T) {
			s, dir := newStore(t)
			path := filepath.Join(dir, "a.txt")
			writeFile(t, path, "note")
			writeFile(t, filepath.Join(dir, "other.txt"), "other")
			seen, err := s.root.Lstat("a.txt")
			if err != nil {
				t.Fatal(err)
			}
			os.Remove(path)
			tc.make(t, path)
			within(t, "opening a "+tc.kind, func() {
				f, _, err := s.openSeen("a.txt", seen)
				if err == nil {
					f.Close()
				}
				wantKind(t, err, tc.kind)
			})
		})
	}
}

func TestOpenNote_RefusesAllButRegularFilesWithoutWaiting(t *testing.T) {
	s, dir := newStore(t)
	writeFile(t, filepath.Join(dir, "inside.txt"), "inside")
	mkfifo(t, filepath.Join(dir, "fifo.txt"))
	ln, err := net.Listen("unix", filepath.Join(dir, "sock.txt"))
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	if err := os.Mkdir(filepath.Join(dir, "dir.txt"), 0o755); err != nil {
		t.Fatal(err)
	}
	for link, target := range map[string]string{
		"zero.txt":     "/dev/zero", // outside the root
		"alias.txt":    "inside.txt",
		"tofifo.txt":   "fifo.txt",
		"dangling.txt": "missing.txt",
	} {
		if err := os.Symlink(target, filepath.Join(dir, link)); err != nil {
			t.Fatal(err)
		}
	}
	want := map[string]string{
		"fifo.txt": "fifo", "sock.txt": "socket", "dir.txt": "directory",
		"zero.txt": "symlink", "alias.txt": "symlink", "tofifo.txt": "symlink", "dangling.txt": "symlink",
	}
	if syscall.Mknod(filepath.Join(dir, "dev.txt"), syscall.S_IFCHR|0o644, 1<<8|5) == nil {
		want["dev.txt"] = "device"
	}
	for name, kind := range want {
		within(t, "reading "+name, func() {
			_, _, err := s.read(name, maxReadBytes)
			wantKind(t, err, kind)
			st, err := s.observe(name)
			if err != nil || st == nil || st.Kind != kind || st.SHA256 != "" {
				t.Errorf("observe(%s) = %+v, %v; want kind %s", name, st, err, kind)
			}
			if _, _, err := s.current(name); err == nil {
				t.Errorf("current(%s) accepted it", name)
			}
		})
	}
	within(t, "listing", func() {
		notes, err := s.list()
		if err != nil || len(notes) != 1 || notes[0].Name != "inside.txt" {
			t.Errorf("list = %+v, %v", notes, err)
		}
	})
}

// A regular file is opened with O_NONBLOCK (see openNote) and must come
// back in blocking mode.
func TestOpenNote_ClearsNonblock(t *testing.T) {
	s, dir := newStore(t)
	writeFile(t, filepath.Join(dir, "a.txt"), "note")
	f, _, err := s.openNote("a.txt")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	rc, err := f.SyscallConn()
	if err != nil {
		t.Fatal(err)
	}
	var flags uintptr
	var errno syscall.Errno
	rc.Control(func(fd uintptr) { // unlike Fd, Control leaves the mode alone
		flags, _, errno = syscall.Syscall(syscall.SYS_FCNTL, fd, syscall.F_GETFL, 0)
	})
	if errno != 0 {
		t.Fatal(errno)
	}
	if flags&syscall.O_NONBLOCK != 0 {
		t.Fatal("the note's descriptor is still non-blocking")
	}
}
