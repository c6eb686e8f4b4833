package main

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"strings"
	"time"

	"github.com/mcp-changeset/changeset-go/ledger"
)

// What the ledgers of --scale hold. Every figure here is fixed, so that the
// same --scale builds the same ledger on every machine and before and
// after a change to the library: only the times differ.
//
// The final statuses are a fixed mix (scaleMix), assigned to changes in a
// seeded random order, so that a ledger of N changes holds exactly
// scaleCounts(N) of each. Changes come from agents (scaleAgents), each
// working in runs of about ten changes on one of four servers
// (scaleServers), interleaved in time as concurrent agents are. Creation
// times spread evenly over the 89 days before the day before the build,
// so that prune --older-than 30d finds about two thirds of the finished
// changes old enough. Three probe values of each kind (scaleProbes) let the
// measurements ask for a common, a rare and an absent value: the rare ones
// are carried by exactly scaleRare changes, spread evenly through the
// ledger, whatever its size.

// scaleMix is the mix of final statuses, in thousandths of the changes.
// Pending changes are previews nobody applied: all of them are past their
// expiry (stale, what expire finds), none has been expired yet.
var scaleMix = []struct {
	Status  ledger.Status
	Per1000 int
}{
	{ledger.Pending, 30},
	{ledger.Expired, 100},
	{ledger.Applied, 555},
	{ledger.ApplyFailed, 80},
	{ledger.Undone, 220},
	{ledger.UndoFailed, 15},
}

// scaleCounts returns how many changes of each status a ledger of n
// changes holds: n times the mix, rounded down, the remainder applied.
func scaleCounts(n int) map[ledger.Status]int {
	out := map[ledger.Status]int{}
	left := n
	for _, m := range scaleMix {
		if m.Status == ledger.Applied {
			continue
		}
		out[m.Status] = n * m.Per1000 / 1000
		left -= out[m.Status]
	}
	out[ledger.Applied] = left
	return out
}

const (
	// scaleSpan is how long the ledger's changes were created over; the
	// newest is created a day before the build (scaleQuiet), so that every
	// apply, undo and expiry the simulation schedules has happened.
	scaleSpan  = 89 * 24 * time.Hour
	scaleQuiet = 24 * time.Hour
	// scaleRare is how many changes carry each rare probe value.
	scaleRare = 20
	// scaleMinChanges is the smallest ledger --scale builds: room for the
	// rare values, each on changes of its own.
	scaleMinChanges = 500
	// scalePreviewTTL is how long a preview's token lives.
	scalePreviewTTL = 15 * time.Minute
	// scaleRunSize is the size of the run whose page is measured: a run of
	// this many changes exists at every scale.
	scaleRunSize = 10
)

// scaleProbes are the values the measurements filter and search by.
var scaleProbes = struct {
	ByCommon, ByRare, ByAbsent             string
	ActionCommon, ActionRare, ActionAbsent string
	TextCommon, TextRare, TextAbsent       string
}{
	ByCommon: "agent:ops-bot", ByRare: "agent:auditor-kim", ByAbsent: "agent:nobody",
	ActionCommon: "set_setting", ActionRare: "rotate_signing_key", ActionAbsent: "drop_database",
	TextCommon: "feature", TextRare: "quarantine", TextAbsent: "zyzzyva",
}

// scaleAgent is an agent that previews changes, with its share of them.
type scaleAgent struct {
	Name   string
	Weight int
}

// scaleAgents: a busy bot, a few people's agents, a CI job and a pool of
// support agents with a small share each.
var scaleAgents = func() []scaleAgent {
	a := []scaleAgent{{"agent:ops-bot", 350}, {"agent:alice", 150}, {"agent:bob", 120}, {"agent:ci-deploy", 100}}
	for i := 1; i <= 28; i++ {
		a = append(a, scaleAgent{fmt.Sprintf("agent:support-%02d", i), 10})
	}
	return a
}()

// scalePeople undo from the dashboard and apply what agents ask them to
// approve.
var scalePeople = []string{"person:ana", "person:raj", "person:mei"}

// scaleAction is an operation of a server, with its share of the
// server's changes and what the ledger records of it.
type scaleAction struct {
	Name          string
	Weight        int
	Undoable      bool
	Transactional bool
	Observe       bool // has before and after states
	Redact        bool // its value is redacted once the change is terminal
	Resources     bool // names several resources (a bulk update)
	Warning       string
}

// scaleServer is one MCP server sharing the ledger: its scope and its
// operations.
type scaleServer struct {
	Name    string
	Weight  int
	Scope   ledger.Digest
	Actions []scaleAction
}

var scaleServers = []*scaleServer{
	{Name: "settings", Weight: 40, Actions: []scaleAction{
		{Name: "set_setting", Weight: 90, Undoable: true, Observe: true},
		{Name: "set_secret", Weight: 10, Undoable: true, Observe: true, Redact: true},
	}},
	{Name: "tickets", Weight: 30, Actions: []scaleAction{
		{Name: "update_ticket", Weight: 70, Undoable: true, Transactional: true, Observe: true},
		{Name: "bulk_update_rows", Weight: 15, Undoable: true, Transactional: true, Observe: true, Resources: true},
		{Name: "send_notification", Weight: 15, Warning: "a sent notification cannot be unsent"},
	}},
	{Name: "labels", Weight: 18, Actions: []scaleAction{
		{Name: "add_label", Weight: 65, Undoable: true, Observe: true},
		{Name: "remove_label", Weight: 35, Undoable: true, Observe: true},
	}},
	{Name: "crm", Weight: 12, Actions: []scaleAction{
		{Name: "update_contact", Weight: 100, Undoable: true, Observe: true},
	}},
}

func init() {
	for _, s := range scaleServers {
		s.Scope = digestOf([]byte("scope:" + s.Name))
	}
}

// scaleRareAction is the rare operation: the settings server's, undoable.
var scaleRareAction = scaleAction{Name: scaleProbes.ActionRare, Undoable: true, Observe: true}

// pick returns an item of items by weight.
func pick[T any](rng *rand.Rand, items []T, weight func(T) int) T {
	total := 0
	for _, it := range items {
		total += weight(it)
	}
	n := rng.IntN(total)
	for _, it := range items {
		if n -= weight(it); n < 0 {
			return it
		}
	}
	return items[len(items)-1]
}

// action picks an operation of s; undoable asks for one that can be
// undone (the change's fate is to be undone).
func (s *scaleServer) action(rng *rand.Rand, undoable bool) scaleAction {
	a := pick(rng, s.Actions, func(a scaleAction) int { return a.Weight })
	if undoable && !a.Undoable {
		return s.Actions[0]
	}
	return a
}

// scaleText makes the text of values: lowercase words, so that no JSON
// escaping is needed and no probe word appears by chance.
type scaleText struct {
	buf string
}

var scaleWords = strings.Fields(`alpha bravo cobalt delta ember fjord garnet harbor indigo jasper kettle
lumen marble nectar onyx pepper quill raven sierra tundra umber velvet willow xenon yonder
zephyr amber basalt cinder dune echo flint grove hollow iris juniper krill lagoon meadow
north orchid prism quartz ridge slate thistle upland vale wharf yarrow zinc release rollout
customer invoice shipping region cluster replica budget quota window retry timeout`)

func newScaleText(rng *rand.Rand) *scaleText {
	var b strings.Builder
	for b.Len() < 1<<20 {
		b.WriteString(scaleWords[rng.IntN(len(scaleWords))])
		b.WriteByte(' ')
	}
	return &scaleText{buf: b.String()}
}

// of returns n bytes of text from a random place.
func (t *scaleText) of(rng *rand.Rand, n int) string {
	n = min(n, len(t.buf)-1)
	start := rng.IntN(len(t.buf) - n)
	return t.buf[start : start+n]
}

// valueSize draws the size of a change's main value: mostly a few
// hundred bytes, some kilobytes, a few tens of kilobytes (a ticket's long
// comment, a rendered config).
func valueSize(rng *rand.Rand) int {
	switch u := rng.Float64(); {
	case u < 0.62:
		return 30 + rng.IntN(180)
	case u < 0.91:
		return 220 + rng.IntN(700)
	case u < 0.99:
		return 950 + rng.IntN(2400)
	default:
		return 5000 + rng.IntN(10000)
	}
}

// scaleContent is what a preview of one change records.
type scaleContent struct {
	Resource  string
	Resources []string
	DependsOn []string
	Summary   string
	Payload   json.RawMessage
	Diff      json.RawMessage
	Before    json.RawMessage // the observed state; nil without Observe
	After     json.RawMessage // the state after a successful apply
	Result    json.RawMessage
	Redact    []string
	Warnings  []string
}

// rareText marks a change that carries the rare search word.
const rareText = 1

// content makes the preview of a change of a, with rare set to rareText
// for a change that must carry the rare search word.
func (t *scaleText) content(rng *rand.Rand, a scaleAction, rare int) scaleContent {
	var c scaleContent
	size := valueSize(rng)
	val := t.of(rng, size)
	old := t.of(rng, max(10, size+rng.IntN(40)-20))
	state := func(m map[string]any) json.RawMessage { return mustJSON(m) }
	diff := func(field string, before, after any) json.RawMessage {
		return mustJSON([]map[string]any{{"field": field, "kind": "changed", "before": before, "after": after}})
	}
	switch a.Name {
	case "set_setting", scaleRareAction.Name:
		key := t.settingKey(rng)
		if rare == rareText {
			key = "quarantine.mode." + t.of(rng, 6)
		}
		c.Summary = fmt.Sprintf("Set %s to %q (was %q)", key, short(val, 24), short(old, 24))
		if a.Name == scaleRareAction.Name {
			key = fmt.Sprintf("kms/prod-%d", rng.IntN(12))
			c.Summary = "Rotate the signing key " + key
		}
		c.Resource = "setting:" + key
		c.Payload = mustJSON(map[string]any{"key": key, "value": val})
		c.Diff = diff("value", old, val)
		c.Before = state(map[string]any{"key": key, "value": old})
		c.After = state(map[string]any{"key": key, "value": val})
		c.Result = mustJSON(map[string]any{"previous": short(old, 40), "version": rng.IntN(5000)})
		if rng.IntN(30) == 0 {
			c.DependsOn = []string{fmt.Sprintf("setting:rollout.policy.%d", rng.IntN(50))}
		}
	case "set_secret":
		name := fmt.Sprintf("db.password.%s", t.of(rng, 5))
		secret := t.of(rng, 32)
		c.Resource, c.Summary, c.Redact = "secret:"+name, "Rotate the secret "+name, []string{"value"}
		c.Payload = mustJSON(map[string]any{"name": name, "value": secret})
		c.Diff = diff("value", "previous secret", secret)
		c.Before = state(map[string]any{"name": name, "version": rng.IntN(90)})
		c.After = state(map[string]any{"name": name, "version": rng.IntN(90) + 90})
		c.Result = mustJSON(map[string]any{"version": rng.IntN(200)})
	case "update_ticket":
		id := 10000 + rng.IntN(90000)
		c.Resource = fmt.Sprintf("ticket:%d", id)
		c.Summary = fmt.Sprintf("Update ticket #%d: status open → %s, add a comment", id, []string{"pending", "solved", "closed"}[rng.IntN(3)])
		c.Payload = mustJSON(map[string]any{"id": id, "status": "solved", "comment": val})
		c.Diff = mustJSON([]map[string]any{
			{"field": "status", "kind": "changed", "before": "open", "after": "solved"},
			{"field": "comment", "kind": "added", "before": nil, "after": short(val, 200)},
		})
		c.Before = state(map[string]any{"id": id, "status": "open", "comments": rng.IntN(12)})
		c.After = state(map[string]any{"id": id, "status": "solved", "comments": rng.IntN(12) + 1})
		c.Result = mustJSON(map[string]any{"updated": true})
	case "bulk_update_rows":
		n := 3 + rng.IntN(10)
		before, after := map[string]any{}, map[string]any{}
		for range n {
			r := fmt.Sprintf("row:orders/%d", rng.IntN(1_000_000))
			c.Resources = append(c.Resources, r)
			before[r] = map[string]any{"status": "packed", "note": t.of(rng, 40)}
			after[r] = map[string]any{"status": "shipped", "note": t.of(rng, 40)}
		}
		c.Summary = fmt.Sprintf("Update %d rows of orders: status packed → shipped", n)
		c.Payload = mustJSON(map[string]any{"table": "orders", "rows": c.Resources, "set": map[string]any{"status": "shipped"}})
		c.Diff = diff("status", "packed", "shipped")
		c.Before, c.After = state(before), state(after)
		c.Result = mustJSON(map[string]any{"rows": n})
	case "send_notification":
		ch := []string{"#ops", "#deploys", "#support", "#billing"}[rng.IntN(4)]
		c.Resource = "channel:" + ch
		c.Summary = fmt.Sprintf("Notify %s: %s", ch, short(val, 60))
		c.Payload = mustJSON(map[string]any{"channel": ch, "text": val})
		c.Diff = mustJSON([]map[string]any{{"field": "message", "kind": "added", "before": nil, "after": short(val, 200)}})
		c.Result = mustJSON(map[string]any{"ts": fmt.Sprint(rng.Int64N(1e10))})
		c.Warnings = []string{a.Warning}
	case "add_label", "remove_label":
		repo := []string{"web", "api", "infra", "mobile"}[rng.IntN(4)]
		label := []string{"p1-incident", "needs-review", "blocked", "good-first-issue", "release-note"}[rng.IntN(5)]
		issue := rng.IntN(9000) + 1
		verb, kind, before, after := "Add", "added", any(nil), any(label)
		if a.Name == "remove_label" {
			verb, kind, before, after = "Remove", "removed", label, nil
		}
		c.Resource = fmt.Sprintf("label:%s#%d/%s", repo, issue, label)
		c.Summary = fmt.Sprintf("%s label %q on %s#%d", verb, label, repo, issue)
		c.Payload = mustJSON(map[string]any{"repo": repo, "issue": issue, "label": label})
		c.Diff = mustJSON([]map[string]any{{"field": "labels", "kind": kind, "before": before, "after": after}})
		c.Before = state(map[string]any{"labels": []string{"triaged"}})
		c.After = state(map[string]any{"labels": []string{"triaged", label}})
		c.Result = mustJSON(map[string]any{"ok": true})
		if rng.IntN(20) == 0 {
			c.DependsOn = []string{fmt.Sprintf("rule:%d", rng.IntN(40))}
		}
	case "update_contact":
		id := rng.IntN(200000)
		c.Resource = fmt.Sprintf("contact:%d", id)
		c.Summary = fmt.Sprintf("Update contact %d: email and notes", id)
		c.Payload = mustJSON(map[string]any{"id": id, "email": fmt.Sprintf("user%d@example.com", id), "notes": val})
		c.Diff = diff("notes", old, val)
		c.Before = state(map[string]any{"id": id, "notes": old})
		c.After = state(map[string]any{"id": id, "notes": val})
		c.Result = mustJSON(map[string]any{"ok": true})
	default:
		panic("scale: no content for " + a.Name)
	}
	if !a.Observe {
		c.Before, c.After = nil, nil
	}
	return c
}

// settingKey draws a setting's key: half of them feature flags (the
// common search word), the rest limits and timeouts.
func (t *scaleText) settingKey(rng *rand.Rand) string {
	if rng.IntN(2) == 0 {
		return "feature." + strings.ReplaceAll(t.of(rng, 8+rng.IntN(8)), " ", "_")
	}
	return []string{"limits.", "timeouts.", "routing.", "cache."}[rng.IntN(4)] + strings.ReplaceAll(t.of(rng, 8+rng.IntN(8)), " ", "_")
}

// short cuts s to at most n bytes.
func short(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n]
}

// mustJSON encodes v; maps encode with sorted keys, so the ledger gets
// canonical JSON.
func mustJSON(v any) json.RawMessage {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return b
}

// digestOf returns the SHA-256 of b, hex, as the ledger stores hashes.
func digestOf(b []byte) ledger.Digest {
	s := sha256.Sum256(b)
	return ledger.Digest(hex.EncodeToString(s[:]))
}

// randomDigest returns a digest of nothing in particular (a token's).
func randomDigest(rng *rand.Rand) ledger.Digest {
	var b [32]byte
	for i := 0; i < 32; i += 8 {
		u := rng.Uint64()
		for j := range 8 {
			b[i+j] = byte(u >> (8 * j))
		}
	}
	return ledger.Digest(hex.EncodeToString(b[:]))
}

// randomID returns prefix and 20 lowercase hex characters, as the
// library's IDs are.
func randomID(rng *rand.Rand, prefix string) string {
	var b [10]byte
	u, v := rng.Uint64(), rng.Uint64()
	for j := range 8 {
		b[j] = byte(u >> (8 * j))
	}
	b[8], b[9] = byte(v), byte(v>>8)
	return prefix + hex.EncodeToString(b[:])
}
