package main

import (
	"testing"

	changeset "github.com/mcp-changeset/changeset-go"
	"github.com/mcp-changeset/changeset-go/changesettest"
)

// TestCheckOperation_SetSetting checks set_setting in process, registered
// by the example's own register function.
func TestCheckOperation_SetSetting(t *testing.T) {
	g := changesettest.NewGuard(t, changeset.Options{})
	s := newStore()
	register(g.Server, g.Guard, s)
	changesettest.CheckOperation(t, g, "set_setting",
		setting{Key: "theme", Value: "dark"},
		setting{Key: "language", Value: "fr"},
		setting{Key: "theme", Value: "a value with \"quotes\" and ünïcode"},
	)
	if got := s.Snapshot(); got["theme"] != "light" || got["language"] != "en" {
		t.Errorf("after the check the settings are %v, want them as they started", got)
	}
}
