package voice

import "strings"

// The fields many results share are described once, in the server's
// instructions, instead of again in the output schema of every tool that
// returns them: the agent reads them once per conversation, not once per
// tool. The output schemas name these fields without a description (see
// the root package's schema.go); every other result field is described in
// its schema.

// Glossary is the line of the instructions that describes the shared
// result fields.
const Glossary = "In results: change_id and run_id name a change and a run; action is the operation; summary and label say what it is; status is where it stands now; next_step says what to do next; resource and resources name what a change touches; diff lists {field, kind, before, after}; warnings say what cannot be undone exactly; fields ending in _at are times (RFC 3339), and fields ending in _by say who (agent:<principal> or person:<name>); receipt is the {seq, hash} of the history entry that recorded the step, and receipts list a change's transitions as {seq, hash, to, at}."

// glossaryFields are the result fields Glossary describes by name.
var glossaryFields = map[string]bool{
	"change_id": true, "run_id": true, "action": true, "summary": true, "label": true,
	"status": true, "next_step": true, "resource": true, "resources": true, "diff": true, "warnings": true,
	"receipt": true, "receipts": true,
}

// InGlossary reports whether Glossary describes the result field name.
func InGlossary(name string) bool {
	return glossaryFields[name] || strings.HasSuffix(name, "_at") || strings.HasSuffix(name, "_by")
}
