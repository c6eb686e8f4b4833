package voice

import (
	"fmt"
	"strings"
)

// The words of person approval: a named person approves each write, out
// of band, at a link the agent passes on. subject names what waits
// (Change or Run), verb what was not done ("applied", "undone"), tool the
// tool to call again, with its prefix. Links, names and notes are data and
// reach the agent quoted.

// maxQuotedNote caps how much of a person's note a sentence quotes.
const maxQuotedNote = 1000

// quoteLong is Quote with a longer cut, for a link or a note that the
// agent should read whole.
func quoteLong(s string, n int) string {
	if len(s) > n {
		s = Cut(s, n)
	}
	return escapeString(strings.ToValidUTF8(s, "\uFFFD"))
}

// where says where people decide approval id: at its link, or, when the
// server names no page, with the operator's tools.
func where(id, link string) string {
	if link == "" {
		return "with the operator's tools (approval " + ID(id) + ")"
	}
	return "at " + quoteLong(link, maxQuotedNote) + " (approval " + ID(id) + ")"
}

// people says how many people must approve.
func people(needed int) string {
	if needed <= 1 {
		return "a person"
	}
	return fmt.Sprintf("%d different people", needed)
}

// PersonLine is the line of the instructions under person approval.
func (v *Voice) PersonLine() string {
	return "On this server a named person must also approve every write, at a link: each preview and each " + v.Tool("undo_run") +
		" dry run returns approval.url. Give the user that link. " + v.Tool("apply_change") + ", " + v.Tool("undo_change") + " and " + v.Tool("undo_run") +
		" wait a little for the decision; while it is still open they say so, nothing is written and no token is spent: call again later. You cannot approve anything yourself."
}

// PersonPreviewNextStep is the next_step of a preview whose apply needs
// needed people to approve, at link.
func (v *Voice) PersonPreviewNextStep(writesOn bool, unknownMode, id, link string, needed int) string {
	s := "Show this diff to the user and give them the approval link: the change must be approved by " + people(needed) + " " + where(id, link) + ". "
	if !writesOn {
		return s + v.writesOffNow(unknownMode) + " This preview stays valid until expires_at."
	}
	return s + "Then call " + v.Tool("apply_change") + " with change_id and confirmation_token; it waits a little for the decision."
}

// PersonDryRunNext is the next step of a dry run whose plan needs needed
// people to approve, at link.
func (v *Voice) PersonDryRunNext(id, link string, needed int) string {
	return "Nothing has been changed yet. Show this report to the user and give them the approval link: this plan must be approved by " + people(needed) + " " + where(id, link) +
		". Then call " + v.Tool("undo_run") + " with dry_run=false and this confirmation_token; it waits a little for the decision."
}

// ApprovalWaiting refuses a write that people have not approved yet:
// have of needed approvals so far.
func (v *Voice) ApprovalWaiting(subject, verb, id, link string, have, needed int, tool string) string {
	return fmt.Sprintf("%s was not %s: it waits to be approved %s, %d of %d approvals so far. Nothing was written and no token was spent. "+
		"Give the user the link, and call %s again later with the same arguments.", subject, verb, where(id, link), have, needed, tool)
}

// ApprovalProgress is the message of a progress notification while a
// write waits for people.
func ApprovalProgress(id, link string, have, needed int) string {
	return fmt.Sprintf("Waiting to be approved %s: %d of %d approvals.", where(id, link), have, needed)
}

// OpenLink is the message of the URL-mode elicitation that asks the
// client to open the approval's page.
func OpenLink(subject string) string {
	return "A person must approve " + subject + " on this page before it goes ahead."
}

// ApprovalDeclined refuses a write a person declined: by is who, note
// their note. apply says whether it was an apply, which ends the change.
func ApprovalDeclined(subject, verb, id, by, note string, apply bool) string {
	s := subject + " was not " + verb + ": " + Quote(by) + " declined it (approval " + ID(id) + ")"
	if note != "" {
		s += " with the note " + quoteLong(note, maxQuotedNote)
	}
	s += ". Nothing was written."
	if apply {
		return s + " The change is now declined and can never be applied; preview again only if the user asks."
	}
	return s + " It stays as it is; do not ask again unless the user asks."
}

// ApprovalExpired refuses a write whose approval's deadline passed at at.
func ApprovalExpired(subject, verb, id, at string) string {
	return subject + " was not " + verb + ": its approval " + ID(id) + " expired at " + at + " before it was used. Nothing was written. Start again (a new preview or dry run) to ask people again."
}

// ApprovalUsed refuses a write whose approval was used already.
func ApprovalUsed(subject, verb, id string) string {
	return subject + " was not " + verb + ": its approval " + ID(id) + " was used already. Nothing was written."
}

// ApprovalNotForThis refuses a write whose approval is bound to something
// else: another change, run, payload or plan.
func ApprovalNotForThis(subject, verb string) string {
	return subject + " was not " + verb + ": the approval people gave is not for what would be written now (another payload or plan). Nothing was written. Start again (a new preview or dry run) so that people approve what would be written."
}

// ApprovalMissing refuses a write that needs people's approval and came
// by a path that brings none.
func ApprovalMissing(subject, verb string) string {
	return subject + " was not " + verb + ": it needs a person's approval, and none came with this call. Nothing was written and no token was spent."
}
