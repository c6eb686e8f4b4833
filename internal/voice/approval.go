package voice

// The refusals of user approval (the user approves in the client). subject
// names what was asked about (Change or Run), verb what was not done
// ("applied", "undone"), tool the tool to call again, with its prefix.

// QuestionExpired refuses an answer that came after the question expired.
func QuestionExpired(subject, verb, at, tool string) string {
	return subject + " was not " + verb + ": the question to the user expired at " + at + " before the answer came; nothing was spent. Call " + tool + " again to ask the user again."
}

// BadState refuses an answer whose request state this server did not
// issue for the call.
func BadState(subject, verb, tool string) string {
	return subject + " was not " + verb + ": the answer came with a request state that this server did not issue for this call (missing, altered, made for another change or run, or by another server); nothing was spent. Call " + tool + " again without inputResponses to ask the user."
}

// NoAnswer refuses a call that carries no answer to the question.
func NoAnswer(subject, verb, tool string) string {
	return subject + " was not " + verb + ": the call carried no answer to the approval question; nothing was spent. Call " + tool + " again without inputResponses to ask the user."
}

// NotApproved: the user answered without approving.
func NotApproved(subject, verb, tool string) string {
	return subject + " was not " + verb + ": the user did not approve it; nothing was spent and it stays as it was. Call " + tool + " again only if the user asks."
}

// Declined: the user declined.
func Declined(subject, verb, tool string) string {
	return subject + " was not " + verb + ": the user declined it; nothing was spent and it stays as it was. Call " + tool + " again only if the user asks."
}

// Dismissed: the user dismissed the question.
func Dismissed(subject, verb, tool string) string {
	return subject + " was not " + verb + ": the user dismissed the question without answering; nothing was spent and it stays as it was. Call " + tool + " again to ask again."
}

// UnknownAnswer refuses an answer of a kind this server does not know.
func UnknownAnswer(subject, verb string) string {
	return subject + " was not " + verb + ": the client's answer to the approval question is not one this server understands; nothing was spent."
}

// NoElicitation refuses a write for a client that cannot ask the user.
func NoElicitation(subject, verb string) string {
	return subject + " was not " + verb + ": this server asks the user to approve every change in their client (form elicitation), and this client does not support it; nothing was spent. " +
		"Use a client that supports elicitation, or ask the server's operator to switch to token approval."
}

// CouldNotAsk says the client failed to ask the user; why is the
// error's text, quoted here as data.
func CouldNotAsk(tool, why string) string {
	return tool + " could not ask the user for approval (the error: " + Quote(why) + "); nothing was applied or undone and nothing was spent. Call it again to ask again."
}
