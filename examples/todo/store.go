package main

import (
	"maps"
	"slices"
	"sync"

	changeset "github.com/mcp-changeset/changeset-go"
)

// maxTodos bounds the list, so that an agent cannot fill memory.
const maxTodos = 1000

// todo is one entry of the list.
type todo struct {
	ID    int    `json:"id"`
	Title string `json:"title"`
	Done  bool   `json:"done"`
}

// fields is a todo without its id: what a change compares and what Observe
// reports.
type fields struct {
	Title string `json:"title"`
	Done  bool   `json:"done"`
}

func (t todo) fields() fields { return fields{Title: t.Title, Done: t.Done} }

// store holds the todos in memory. Every write is a compare-and-set under
// the mutex: it names the state it expects and changes nothing otherwise.
type store struct {
	mu    sync.Mutex
	todos map[int]todo
	// next is the id the next create_todo preview reserves. It only grows,
	// so two previews never share an id, whichever is applied first, and
	// a deleted todo's id is never given to another.
	next int
}

func newStore() *store { return &store{todos: map[int]todo{}, next: 1} }

// reserve returns a fresh id for a create.
func (s *store) reserve() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	id := s.next
	s.next++
	return id
}

func (s *store) get(id int) (todo, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	t, ok := s.todos[id]
	return t, ok
}

// state is what Observe reports for id: its fields, or nil when there is no
// such todo.
func (s *store) state(id int) *fields {
	if t, ok := s.get(id); ok {
		f := t.fields()
		return &f
	}
	return nil
}

// list returns the todos sorted by id.
func (s *store) list() []todo {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]todo, 0, len(s.todos))
	for _, id := range slices.Sorted(maps.Keys(s.todos)) {
		out = append(out, s.todos[id])
	}
	return out
}

func (s *store) count() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.todos)
}

// swap replaces the todo id, expected to be want (nil: absent), by to
// (nil: delete it).
func (s *store) swap(id int, want, to *fields) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	cur, ok := s.todos[id]
	switch {
	case want == nil && ok:
		return changeset.Refuse("todo %d exists already; nothing was changed", id)
	case want != nil && !ok:
		return changeset.Refuse("todo %d no longer exists; nothing was changed", id)
	case want != nil && cur.fields() != *want:
		return changeset.Refuse("todo %d changed since the preview; nothing was changed", id)
	case want == nil && len(s.todos) >= maxTodos:
		return changeset.Refuse("the list is full (%d todos); delete some first", maxTodos)
	}
	if to == nil {
		delete(s.todos, id)
		return nil
	}
	s.todos[id] = todo{ID: id, Title: to.Title, Done: to.Done}
	if id >= s.next {
		s.next = id + 1
	}
	return nil
}
