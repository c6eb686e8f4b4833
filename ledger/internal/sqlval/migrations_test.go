package sqlval

import (
	"io/fs"
	"testing"
	"testing/fstest"
)

// TestLoadMigrations_AcceptsAGap loads migrations numbered 1, 2 and 4 (3
// left to another branch): the schema version is the last number, a
// ledger at 2 runs 4 alone, and one at 4 runs nothing.
func TestLoadMigrations_AcceptsAGap(t *testing.T) {
	fsys := fstest.MapFS{
		"m/001_a.sql": {Data: []byte("a")},
		"m/002_b.sql": {Data: []byte("b")},
		"m/004_d.sql": {Data: []byte("d")},
	}
	ms := LoadMigrations(fsys, "m", "test", 4)
	if len(ms) != 3 || ms[2].Version != 4 || ms[2].SQL != "d" {
		t.Fatalf("loaded %+v", ms)
	}
	for have, want := range map[int]string{0: "abd", 1: "bd", 2: "d", 3: "d", 4: ""} {
		got := ""
		for _, m := range Pending(ms, have) {
			got += m.SQL
		}
		if got != want {
			t.Errorf("a ledger at version %d runs %q, want %q", have, got, want)
		}
	}
}

// TestLoadMigrations_RefusesWhatIsNotASchema panics on a last version that
// is not the schema's, on two files of one number and on a bad name.
func TestLoadMigrations_RefusesWhatIsNotASchema(t *testing.T) {
	for name, tc := range map[string]struct {
		fsys fstest.MapFS
		want int
	}{
		"last is not the schema version": {fstest.MapFS{"m/001_a.sql": {}, "m/003_c.sql": {}}, 2},
		"two files of one number":        {fstest.MapFS{"m/001_a.sql": {}, "m/002_b.sql": {}, "m/002_c.sql": {}}, 2},
		"a name without a number":        {fstest.MapFS{"m/001_a.sql": {}, "m/x_b.sql": {}}, 1},
		"version zero":                   {fstest.MapFS{"m/000_a.sql": {}, "m/001_b.sql": {}}, 1},
		"no migrations":                  {fstest.MapFS{"m": {Mode: fs.ModeDir}}, 0},
	} {
		t.Run(name, func(t *testing.T) {
			defer func() {
				if recover() == nil {
					t.Error("loaded without a panic")
				}
			}()
			LoadMigrations(tc.fsys, "m", "test", tc.want)
		})
	}
}
