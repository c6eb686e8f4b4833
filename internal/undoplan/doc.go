// Package undoplan holds the rules of a run's undo: which of a run's
// changes are undone, which are kept and why. Every decision is made here
// and only here. The planner (a dry run) and the execution (the real undo)
// each make one Pass over the same steps, newest first, and call the same
// rules; they differ only in where a resource's state comes from (the plan
// derives it from the run's own snapshots, the execution reads it right
// before each inverse) and in whether the inverse really runs.
//
// The rules, in the order a Pass applies them to one change:
//
//  1. A change whose undo failed earlier is still in place: it is kept.
//  2. A change the plan closes as "no net change" needs no write.
//  3. A change whose operation is gone, has no inverse or whose undo
//     window closed cannot be undone: it is irreversible, and kept.
//  4. A change whose undo would remove a resource that a kept change of
//     the same scope depends on is held back: it is kept.
//  5. A change to a resource that a newer kept change of the run keeps is
//     kept too, whatever the resource's state: the resource stays as the
//     person (or the kept change) left it.
//  6. A change without an "after" snapshot cannot be checked: it is kept.
//  7. A change whose resources are not all in the state it left them in is
//     kept whole, with the drift of each resource that moved.
//  8. Otherwise it is undone, and the state its resources are expected in
//     for the older changes becomes its "before".
//
// A kept change keeps every one of its resources (rule 5 for the older
// changes of each).
//
// The rules decide; package voice words. A Pass words each reason through
// the voice it is given, so that reasons name tools with the Guard's
// prefix, and every name or value of a change (a resource, a field, a
// summary, a state found) is quoted and escaped there, never spliced bare.
package undoplan
