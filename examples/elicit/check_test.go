package main

import (
	"testing"

	changeset "github.com/mcp-changeset/changeset-go"
	"github.com/mcp-changeset/changeset-go/changesettest"
)

// TestCheckOperation_SetSetting checks set_setting in process, registered
// by the example's own register function. The example's server asks the
// user to approve each write (changeset.UserApproval, set in main, not in
// register); CheckOperation drives apply_change with confirmation tokens,
// so the operation is registered here on the kit's Guard, which hands out
// tokens (changeset.TokenApproval, the default). The operation's preview,
// apply, undo and Observe are the same either way; the user's approval
// itself is tested over stdio and HTTP in main_test.go and
// stateless_test.go.
func TestCheckOperation_SetSetting(t *testing.T) {
	g := changesettest.NewGuard(t, changeset.Options{Approval: changeset.TokenApproval})
	s := newStore()
	register(g.Server, g.Guard, s)
	changesettest.CheckOperation(t, g, "set_setting",
		setting{Key: "theme", Value: "dark"},
		setting{Key: "language", Value: "fr"},
		setting{Key: "theme", Value: "a value with \"quotes\" and ünïcode"},
	)
	if got := s.Snapshot(); got["theme"] != "light" || got["language"] != "en" || len(got) != 2 {
		t.Errorf("after the check the settings are %v, want them as they started", got)
	}
}
