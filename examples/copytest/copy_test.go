// Package copytest_test checks what the examples promise their readers:
// each example folder is a whole program that builds on its own once
// copied out of this repository, importing only public packages.
package copytest_test

import (
	"bytes"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// module is this repository's module path.
const module = "github.com/mcp-changeset/changeset-go"

// checkout is the root of this repository: the module the copies are
// pointed at with a replace directive, as a user trying a change would.
func checkout(t *testing.T) string {
	t.Helper()
	out, err := exec.Command("go", "env", "GOMOD").Output()
	if err != nil {
		t.Fatalf("go env GOMOD: %v", err)
	}
	gomod := strings.TrimSpace(string(out))
	if gomod == "" || gomod == os.DevNull {
		t.Fatal("the test does not run inside the module")
	}
	return filepath.Dir(gomod)
}

// programs are the example folders that hold a program: those with a Go
// file that is not a test.
func programs(t *testing.T, examples string) []string {
	t.Helper()
	entries, err := os.ReadDir(examples)
	if err != nil {
		t.Fatal(err)
	}
	var dirs []string
	for _, e := range entries {
		if !e.IsDir() || e.Name() == "internal" {
			continue
		}
		files, _ := filepath.Glob(filepath.Join(examples, e.Name(), "*.go"))
		for _, f := range files {
			if !strings.HasSuffix(f, "_test.go") {
				dirs = append(dirs, e.Name())
				break
			}
		}
	}
	return dirs
}

// copyDir copies the regular files under src to dst, leaving out what a
// user would not copy (node_modules).
func copyDir(t *testing.T, src, dst string) {
	t.Helper()
	err := filepath.WalkDir(src, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(src, path)
		target := filepath.Join(dst, rel)
		switch {
		case d.IsDir() && d.Name() == "node_modules":
			return filepath.SkipDir
		case d.IsDir():
			return os.MkdirAll(target, 0o755)
		case !d.Type().IsRegular():
			return nil
		}
		data, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		return os.WriteFile(target, data, 0o644)
	})
	if err != nil {
		t.Fatal(err)
	}
}

// TestEveryExampleBuildsFromACopyOfItsFolderAlone copies each example
// folder into a module of its own (example.com/copy) that requires this
// one, replaced by the checkout, and builds it. An example that imports an
// internal package, or a file of another example, fails here: Go refuses
// internal imports across modules. The build runs offline (GOPROXY=off)
// from the module cache the checkout's own build filled.
func TestEveryExampleBuildsFromACopyOfItsFolderAlone(t *testing.T) {
	if testing.Short() {
		t.Skip("builds every example (-short)")
	}
	root := checkout(t)
	sum, err := os.ReadFile(filepath.Join(root, "go.sum"))
	if err != nil {
		t.Fatal(err)
	}
	goVersion := goDirective(t, filepath.Join(root, "go.mod"))
	dirs := programs(t, filepath.Join(root, "examples"))
	if len(dirs) < 6 {
		t.Fatalf("found only the example programs %v", dirs)
	}
	for _, name := range dirs {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			dst := filepath.Join(t.TempDir(), name)
			copyDir(t, filepath.Join(root, "examples", name), dst)
			writeModule(t, dst, "example.com/copy", root, goVersion, sum)
			cmd := exec.Command("go", "build", "-o", filepath.Join(t.TempDir(), name), "./")
			cmd.Dir = dst
			cmd.Env = append(os.Environ(), "GOFLAGS=-mod=mod", "GOPROXY=off", "GOWORK=off")
			var out bytes.Buffer
			cmd.Stdout, cmd.Stderr = &out, &out
			if err := cmd.Run(); err != nil {
				t.Fatalf("go build of a copy of examples/%s alone: %v\n%s", name, err, out.String())
			}
		})
	}
}

// writeModule makes dir a module of its own, named name, that requires
// this one replaced by the checkout at root, with the checkout's go.sum.
func writeModule(t *testing.T, dir, name, root, goVersion string, sum []byte) {
	t.Helper()
	gomod := "module " + name + "\n\ngo " + goVersion + "\n\n" +
		"require " + module + " v0.0.0\n\n" +
		"replace " + module + " => " + root + "\n"
	if err := os.WriteFile(filepath.Join(dir, "go.mod"), []byte(gomod), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "go.sum"), sum, 0o644); err != nil {
		t.Fatal(err)
	}
}

// goDirective is the go line of a go.mod file.
func goDirective(t *testing.T, path string) string {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(data), "\n") {
		if v, ok := strings.CutPrefix(line, "go "); ok {
			return strings.TrimSpace(v)
		}
	}
	t.Fatalf("%s has no go directive", path)
	return ""
}
