package main

import (
	"bytes"
	"context"
	"strings"
	"testing"
)

// TestClientDemo runs the whole demo: it is the project's smoke test, and
// fails when any promise it narrates breaks.
func TestClientDemo(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the notes server")
	}
	var out bytes.Buffer
	d := &demo{out: &out, verbose: true}
	if err := d.run(context.Background()); err != nil {
		t.Fatalf("%v\n%s", err, out.String())
	}
	for _, want := range []string{"refused: change chg_", "cannot be applied (status: applied)", `"skipped"`, "keeps the person's edit"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("the narration lacks %q", want)
		}
	}
}
