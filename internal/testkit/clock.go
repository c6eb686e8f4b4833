// Package testkit holds small helpers the project's tests share.
package testkit

import "github.com/mcp-changeset/changeset-go/changesettest"

// Clock is a settable clock, safe for concurrent use: pass its Now as a
// Guard's or a dashboard's clock and move time with Advance or Set. It is
// the clock package changesettest gives users.
type Clock = changesettest.Clock

// NewClock returns a clock that reads t.
var NewClock = changesettest.NewClock
