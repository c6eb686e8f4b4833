package changeset

import (
	"fmt"
	"log/slog"
	"net/url"
	"time"

	"github.com/mcp-changeset/changeset-go/checkpoint"
	"github.com/mcp-changeset/changeset-go/internal/seal"
	"github.com/mcp-changeset/changeset-go/ledger"
	"github.com/mcp-changeset/changeset-go/notify"
)

// Defaults for Options fields left zero.
const (
	DefaultTTL                = 15 * time.Minute
	DefaultMinTTL             = 60 * time.Second
	DefaultMaxTTL             = time.Hour
	DefaultUndoTTL            = 24 * time.Hour
	DefaultMaxPayloadBytes    = 64 << 10
	DefaultMaxResultBytes     = 64 << 10
	DefaultMaxClockSkew       = 60 * time.Second
	DefaultBusyTimeout        = 5 * time.Second
	DefaultMaxPendingPerScope = 1000
	DefaultWriteModeEnv       = "MCP_CHANGESET_WRITE_MODE"
	// DefaultApprovalWait is how long, under PersonApproval, an apply or
	// undo waits for people to decide before it is refused as waiting.
	DefaultApprovalWait = 20 * time.Second
	// MaxApprovalWait bounds Options.ApprovalWait: a tool call that waits
	// longer outlives most clients' request timeouts.
	MaxApprovalWait = 5 * time.Minute
)

// NoExpiry, as Options.UndoTTL, makes undo tokens valid for as long as the
// change stays applied. An undo token is a live capability for a second
// write; prefer a finite window.
const NoExpiry time.Duration = -1

// ApprovalKeySize is the length of Options.ApprovalKey: 32 bytes.
const ApprovalKeySize = 32

// The key seals with package seal, so its sizes must agree: a negative
// constant converted to uint does not compile.
const _ = uint(ApprovalKeySize-seal.KeySize) + uint(seal.KeySize-ApprovalKeySize)

// Options configure a Guard. The zero value of every field selects its
// default; New refuses values out of range.
type Options struct {
	// LedgerPath is the ledger to open, created if missing: a SQLite file
	// path, or a postgres:// URL when the program imports
	// github.com/mcp-changeset/changeset-go/ledger/postgres. Ignored when
	// Ledger is set.
	LedgerPath string
	// Ledger is an already open ledger (for example PostgreSQL). The Guard
	// neither changes nor closes a ledger it did not open, so several
	// Guards may share one.
	Ledger *ledger.Ledger

	// TTL is how long a confirmation token stays valid (default 15 min). It
	// must lie within MinTTL and MaxTTL (default 60 s to 1 h).
	TTL, MinTTL, MaxTTL time.Duration
	// UndoTTL is how long an undo token stays valid after the apply
	// (default 24 h); NoExpiry removes the limit. MaxUndoTTL, when set, caps
	// UndoTTL and forbids NoExpiry, for deployments with a hard policy.
	UndoTTL, MaxUndoTTL time.Duration

	// WriteMode is WriteGuarded or WriteDisabled. When empty, the
	// environment variable WriteModeEnv (default MCP_CHANGESET_WRITE_MODE)
	// decides at each call: writes are enabled only when it reads
	// "guarded".
	WriteMode    string
	WriteModeEnv string

	// Scope is a fixed scope for every change (e.g. an account ID).
	// ScopeFunc, when set, takes precedence and is asked on every call.
	Scope     string
	ScopeFunc ScopeFunc

	// Principal names the caller of a request: the user behind the agent.
	// When nil, the Guard takes the bearer token's user
	// (req.Extra.TokenInfo.UserID) over HTTP, else the client's name from
	// its initialize request. Where requests carry no session (stateless
	// HTTP) the principal keys the caller's session run. An error from it
	// refuses the call ([ErrRefused]) without showing the error to the agent.
	Principal PrincipalFunc

	// NoSessionRuns turns session runs off: a preview without run_id then
	// joins no run. By default it joins the run of its caller's session,
	// started by the Guard (see SessionRunIdle).
	NoSessionRuns bool
	// SessionRunIdle is how long a session run waits for another preview
	// before the session's next preview starts a new one (default 30 min).
	SessionRunIdle time.Duration

	// Prefix goes in front of every tool name the Guard registers.
	Prefix string
	// NoSharedTools leaves out apply_change, undo_change and
	// get_change_status (and the run tools), for servers that wire their own
	// (for example to ask the user first). Previews are still registered.
	NoSharedTools bool

	// MaxPayloadBytes caps the canonical JSON of a proposal's payload, diff
	// and summary together (default 64 KiB). MaxResultBytes caps an apply's
	// result (default 64 KiB); a larger result fails the change without an
	// undo token, although the write has happened.
	MaxPayloadBytes, MaxResultBytes int
	// MaxPendingPerScope caps the previews waiting for an apply in one
	// scope (default 1000): a preview beyond it is refused before anything
	// is stored, so that one caller cannot fill the ledger. Previews past
	// their expiry do not count.
	MaxPendingPerScope int

	// BusyTimeout is how long a ledger statement waits for another
	// process's lock (default 5 s).
	BusyTimeout time.Duration
	// MaxClockSkew: a clock that reads more than this before a row's
	// creation time refuses claims rather than extend a token's life
	// (default 60 s).
	MaxClockSkew time.Duration
	// AllowNetworkFS lets a SQLite ledger live on NFS or SMB. See
	// ledger.OpenOptions.
	AllowNetworkFS bool
	// Durability says which of the ledger's commits wait for the disk:
	// all (ledger.DurabilityFull, the default) or only the claims
	// (ledger.DurabilityClaims), which keeps at-most-once and risks, on
	// power loss only, a preview to redo or a change left applying for an
	// operator to reconcile. See ledger.Durability and
	// docs/reliability.md. Ignored when Ledger is set (it was opened with
	// one).
	Durability ledger.Durability

	// Approval selects who approves a write: TokenApproval (the default),
	// UserApproval, which asks the user through the client before every
	// apply and undo, or PersonApproval, where a named person approves
	// out of band as well. An Operation may override it (see
	// Operation.Approval). See docs/approval.md.
	Approval Approval
	// ApprovalWait is how long, under PersonApproval, apply_change,
	// undo_change and undo_run wait for people to decide before they
	// answer that the write still waits (default DefaultApprovalWait, at
	// most MaxApprovalWait). Nothing is written and no token is spent
	// while it waits; the agent calls again later.
	ApprovalWait time.Duration
	// Approvers is how many distinct people must approve each write under
	// PersonApproval (default 1, at most ledger.MaxApprovers): 2 is the
	// two-person rule. An Operation may ask for another number.
	Approvers int
	// DashboardURL is the base of approval links, such as
	// "https://changes.example.com": the page where people decide approval
	// apr_… is DashboardURL + "/approvals/apr_…" (the dashboard's route;
	// an application with its own interface serves that path). The agent
	// passes the link on to the user, and Notify's events carry it. Empty:
	// no link; people decide with the CLI or the Go API.
	DashboardURL string
	// Notify, when set, delivers the ledger's events (an approval
	// requested or decided, a change failed, a run undone) to a webhook:
	// New runs a copy of it in a goroutine until Close. When its Link is
	// nil, the copy links to DashboardURL's pages.
	Notify *notify.Webhook
	// Checkpoints, when set, signs a checkpoint of the ledger's history
	// once at start and then every Checkpoints.Every, each written to a
	// file in Checkpoints.Dir (see package checkpoint): New runs a copy of
	// it in a goroutine until Close. Its Logger defaults to Logger and its
	// clock to Clock. Nil: no checkpoints (the operator can still take one
	// with mcp-changeset checkpoint).
	Checkpoints *checkpoint.Schedule
	// ApprovalKey is the key (ApprovalKeySize bytes) that seals the request
	// state of UserApproval. When nil, New uses a key kept in the ledger,
	// created once, so that every server sharing the ledger uses the same
	// one; set it (from a secret store) when people who must not approve
	// changes can read the ledger.
	ApprovalKey []byte

	// Clock replaces time.Now (tests). It is the Guard's own clock: every
	// time the Guard records (when a change was previewed, applied, undone,
	// when its token expires, the times of its history entries) and every
	// expiry it checks reads it. When the Guard opens the ledger
	// (LedgerPath) the ledger reads it too, for ExpireStale, Prune and
	// Reconcile; a ledger given in Ledger keeps the clock it was opened
	// with ([ledger.OpenOptions].Clock): New never changes a ledger it did
	// not open, so Guards sharing one each keep their own clock.
	Clock func() time.Time
	// Logger receives one record per transition; tokens are never logged.
	// Nil discards.
	Logger *slog.Logger
	// Observer, when set, sees every preview, apply, undo and run undo
	// as it begins and ends, and every transition of a change: for traces
	// and metrics (see package otelchangeset). Nil costs nothing.
	Observer Observer
}

// resolve fills defaults and validates o.
func (o Options) resolve() (Options, error) {
	setDuration(&o.TTL, DefaultTTL)
	setDuration(&o.MinTTL, DefaultMinTTL)
	setDuration(&o.MaxTTL, DefaultMaxTTL)
	setDuration(&o.UndoTTL, DefaultUndoTTL)
	setDuration(&o.BusyTimeout, DefaultBusyTimeout)
	setDuration(&o.MaxClockSkew, DefaultMaxClockSkew)
	setDuration(&o.SessionRunIdle, DefaultSessionRunIdle)
	setDuration(&o.ApprovalWait, DefaultApprovalWait)
	if o.Approval == 0 {
		o.Approval = TokenApproval
	}
	if o.Approvers == 0 {
		o.Approvers = 1
	}
	if o.MaxPayloadBytes == 0 {
		o.MaxPayloadBytes = DefaultMaxPayloadBytes
	}
	if o.MaxResultBytes == 0 {
		o.MaxResultBytes = DefaultMaxResultBytes
	}
	if o.MaxPendingPerScope == 0 {
		o.MaxPendingPerScope = DefaultMaxPendingPerScope
	}
	if o.WriteModeEnv == "" {
		o.WriteModeEnv = DefaultWriteModeEnv
	}
	if o.Clock == nil {
		o.Clock = time.Now
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	switch {
	case o.MinTTL < 0 || o.MaxTTL < 0 || o.TTL < 0:
		return o, fmt.Errorf("changeset: TTL, MinTTL and MaxTTL must not be negative")
	case o.MinTTL > o.MaxTTL:
		return o, fmt.Errorf("changeset: MinTTL %v is greater than MaxTTL %v", o.MinTTL, o.MaxTTL)
	case o.TTL < o.MinTTL || o.TTL > o.MaxTTL:
		return o, fmt.Errorf("changeset: TTL %v is outside %v to %v (set MinTTL/MaxTTL to widen the bounds)", o.TTL, o.MinTTL, o.MaxTTL)
	case o.UndoTTL < 0 && o.UndoTTL != NoExpiry:
		return o, fmt.Errorf("changeset: UndoTTL %v is negative (use NoExpiry for undo tokens that never expire)", o.UndoTTL)
	case o.MaxUndoTTL < 0:
		return o, fmt.Errorf("changeset: MaxUndoTTL %v is negative", o.MaxUndoTTL)
	case o.MaxUndoTTL > 0 && o.UndoTTL == NoExpiry:
		return o, fmt.Errorf("changeset: UndoTTL NoExpiry is not allowed when MaxUndoTTL is set")
	case o.MaxUndoTTL > 0 && o.UndoTTL > o.MaxUndoTTL:
		return o, fmt.Errorf("changeset: UndoTTL %v exceeds MaxUndoTTL %v", o.UndoTTL, o.MaxUndoTTL)
	case o.MaxPayloadBytes < 0 || o.MaxResultBytes < 0:
		return o, fmt.Errorf("changeset: MaxPayloadBytes and MaxResultBytes must not be negative")
	case o.MaxPendingPerScope < 0:
		return o, fmt.Errorf("changeset: MaxPendingPerScope %d is negative", o.MaxPendingPerScope)
	case o.BusyTimeout < 0:
		return o, fmt.Errorf("changeset: BusyTimeout %v is negative", o.BusyTimeout)
	case o.SessionRunIdle < 0:
		return o, fmt.Errorf("changeset: SessionRunIdle %v is negative", o.SessionRunIdle)
	case o.MaxClockSkew < 0:
		return o, fmt.Errorf("changeset: MaxClockSkew %v is negative", o.MaxClockSkew)
	case o.WriteMode != "" && o.WriteMode != WriteGuarded && o.WriteMode != WriteDisabled:
		return o, fmt.Errorf("changeset: unknown WriteMode %q (want %q or %q)", o.WriteMode, WriteGuarded, WriteDisabled)
	case !validToolPrefix(o.Prefix):
		return o, fmt.Errorf("changeset: Prefix %q may hold only letters, digits, '_', '-' and '.'", o.Prefix)
	case o.Approval != TokenApproval && o.Approval != UserApproval && o.Approval != PersonApproval:
		return o, fmt.Errorf("changeset: unknown Approval %v (want TokenApproval, UserApproval or PersonApproval)", o.Approval)
	case o.ApprovalWait < 0 || o.ApprovalWait > MaxApprovalWait:
		return o, fmt.Errorf("changeset: ApprovalWait %v is outside 0 to %v", o.ApprovalWait, MaxApprovalWait)
	case o.Approvers < 1 || o.Approvers > ledger.MaxApprovers:
		return o, fmt.Errorf("changeset: Approvers %d is outside 1 to %d", o.Approvers, ledger.MaxApprovers)
	case o.DashboardURL != "" && !validBaseURL(o.DashboardURL):
		return o, fmt.Errorf("changeset: DashboardURL %q must be an absolute http or https URL without query or fragment", o.DashboardURL)
	case o.ApprovalKey != nil && len(o.ApprovalKey) != ApprovalKeySize:
		return o, fmt.Errorf("changeset: ApprovalKey is %d bytes, want %d", len(o.ApprovalKey), ApprovalKeySize)
	case o.Ledger == nil && o.LedgerPath == "":
		return o, fmt.Errorf("changeset: set Options.LedgerPath or Options.Ledger")
	}
	return o, nil
}

// validBaseURL reports whether s can be the base of links: an absolute
// http or https URL with a host and no query or fragment.
func validBaseURL(s string) bool {
	u, err := url.Parse(s)
	return err == nil && (u.Scheme == "http" || u.Scheme == "https") && u.Host != "" &&
		u.RawQuery == "" && u.Fragment == "" && !u.ForceQuery && u.User == nil
}

func setDuration(d *time.Duration, def time.Duration) {
	if *d == 0 {
		*d = def
	}
}

func validToolPrefix(p string) bool {
	for _, r := range p {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '_' || r == '-' || r == '.') {
			return false
		}
	}
	return len(p) <= 64
}
