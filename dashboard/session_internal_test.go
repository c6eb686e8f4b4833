package dashboard

import (
	"testing"
	"time"
)

// The trusted header's people share one session each, which no cookie can
// name; they count towards MaxSessions like everyone, and an evicted or
// expired one is started afresh.
func TestSessionStore_HeaderSessions(t *testing.T) {
	now := time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC)
	s := newSessionStore(time.Hour, 2, func() time.Time { return now })
	carol := s.forHeader("carol")
	if again := s.forHeader("carol"); again.id != carol.id || again.csrf != carol.csrf || again.person != "carol" || !again.header {
		t.Fatalf("carol's second request got session %+v, want her first", again)
	}
	if s.get(carol.id) != nil {
		t.Error("a cookie can name a header session")
	}
	now = now.Add(time.Minute) // carol's is the oldest session
	if dave := s.forHeader("dave"); dave.id == carol.id {
		t.Error("two people share a session")
	}
	now = now.Add(time.Minute)
	ana := s.create("ana")
	if got := s.get(ana.id); got == nil || got.person != "ana" || got.header {
		t.Fatalf("ana's session = %+v", got)
	}
	if len(s.m) != 2 {
		t.Errorf("%d sessions kept, want the cap of 2", len(s.m))
	}
	if again := s.forHeader("carol"); again.id == carol.id {
		t.Error("carol's evicted session came back")
	}
	now = now.Add(2 * time.Hour)
	if later := s.forHeader("carol"); later.id == carol.id || !now.Before(later.expires) {
		t.Error("an expired header session was reused")
	}
	if len(s.byHeader) > len(s.m) {
		t.Errorf("byHeader keeps %d entries for %d sessions", len(s.byHeader), len(s.m))
	}
}
