package changeset

import (
	"encoding/json"
	"fmt"
	"maps"
	"math/big"
	"reflect"
	"slices"
	"strings"

	"github.com/google/jsonschema-go/jsonschema"
	"github.com/mcp-changeset/changeset-go/internal/voice"
)

// Every client puts the whole tools/list into the model's context, in
// every conversation, so the schemas here are written to be read cheaply
// (DESIGN.md, "What the agent reads": the settings example's tools/list at
// most 8,000 bytes, no tool over 2,000). docs/agent-cost.md measures them.

// inputSchema infers the input schema of In with schemaOptions.
func inputSchema[In any]() (*jsonschema.Schema, error) { return jsonschema.For[In](schemaOptions) }

// schemaOptions infers schemas that every MCP client accepts: a raw JSON
// value may be any JSON type (not the bare schema true, which clients on the
// TypeScript SDK reject, nor the byte array jsonschema infers).
var schemaOptions = &jsonschema.ForOptions{TypeSchemas: map[reflect.Type]*jsonschema.Schema{
	reflect.TypeFor[json.RawMessage](): anyJSON(),
	reflect.TypeFor[any]():             anyJSON(),
	// math/big encodes its numbers as JSON numbers of any size (the
	// ledger keeps them exactly), not as the strings jsonschema infers.
	reflect.TypeFor[big.Int]():   {Type: "integer"},
	reflect.TypeFor[big.Float](): {Type: "number"},
	reflect.TypeFor[big.Rat]():   {Type: "string"},
}}

// anyJSONTypes are all the JSON types: a schema that lists them allows any
// value.
var anyJSONTypes = []string{"object", "array", "string", "number", "boolean", "null"}

func anyJSON() *jsonschema.Schema {
	return &jsonschema.Schema{Types: slices.Clone(anyJSONTypes)}
}

// nestedResults are results of a tool of their own that other results
// carry (a run's changes are change statuses, its report is undo_run's
// result). Where they are nested, their schema is an object alone and the
// field's description says what it holds: the fields are described once,
// in the schema of the tool that returns them, instead of again in every
// tool that carries them.
var nestedResults = []reflect.Type{
	reflect.TypeFor[ChangeStatus](),
	reflect.TypeFor[RunReport](),
}

// outputSchema infers the output schema of T with schemaOptions, then makes
// it cheap to read: nestedResults inside it are plain objects, and
// compactOutput drops what tells an agent nothing and defines repeated item
// schemas once.
func outputSchema[T any]() *jsonschema.Schema {
	t := reflect.TypeFor[T]()
	opts := outputOptions(t)
	s, err := jsonschema.ForType(t, opts)
	if err != nil {
		panic(fmt.Sprintf("changeset: output schema of %v: %v", t, err))
	}
	compactOutput(s)
	return s
}

// outputOptions are schemaOptions with the nestedResults other than t
// inferred as plain objects.
func outputOptions(t reflect.Type) *jsonschema.ForOptions {
	opts := &jsonschema.ForOptions{TypeSchemas: maps.Clone(schemaOptions.TypeSchemas)}
	for _, n := range nestedResults {
		if n != t {
			opts.TypeSchemas[n] = &jsonschema.Schema{Type: "object"}
		}
	}
	// An approval's three fields are named in its field's description.
	opts.TypeSchemas[reflect.TypeFor[ApprovalRef]()] = &jsonschema.Schema{Type: "object"}
	// A receipt's fields are named in the glossary (voice.Glossary).
	opts.TypeSchemas[reflect.TypeFor[Receipt]()] = &jsonschema.Schema{Type: "object"}
	opts.TypeSchemas[reflect.TypeFor[TransitionReceipt]()] = &jsonschema.Schema{Type: "object"}
	return opts
}

// compactOutput rewrites an inferred output schema in place, accepting
// every result the server's own encoding of its Go types produces:
//
//   - "additionalProperties": false and "required" go: they constrain only
//     what the server itself sends, and tell an agent nothing;
//   - an optional property's ["null", T] becomes T: encoding/json leaves
//     out a nil slice or pointer that is omitempty or omitzero, it never
//     sends null for it; and a list is always a list (every list a result
//     carries is made, empty or not, never left nil);
//   - a property that lists every JSON type and has a description keeps
//     the description alone (the same schema, an object rather than the
//     bare true the TypeScript SDK rejects);
//   - a list of objects (a run report's entries, a diff, drift) is a list
//     of objects whose fields its description names in words, once per
//     schema: `each {change_id, action, summary, reason, drift: [{field,
//     expected, found}]}`, and a later list of the same items `each as in
//     skipped`. The fields of those items are described where they are a
//     tool's own result, or in the docs; repeating a typed, described
//     schema for every list is what made a report's schema five times its
//     size. A list of another tool's results (a run's changes) is a list
//     whose description names them.
func compactOutput(root *jsonschema.Schema) {
	simplify(root)
	describeItems(root, map[string]string{})
	glossaryFields(root)
	timesAndActors(root)
}

// timesAndActors lists a result's times and actors (the properties ending
// in "_at" and "_by", which the glossary describes) by name in its
// description instead of one property each: they are many, alike, and
// never what an agent acts on.
func timesAndActors(root *jsonschema.Schema) {
	var names []string
	for _, name := range propertyOrder(root) {
		if strings.HasSuffix(name, "_at") || strings.HasSuffix(name, "_by") {
			names = append(names, name)
			delete(root.Properties, name)
		}
	}
	if len(names) == 0 {
		return
	}
	root.PropertyOrder = slices.DeleteFunc(root.PropertyOrder, func(n string) bool {
		return strings.HasSuffix(n, "_at") || strings.HasSuffix(n, "_by")
	})
	root.Description = strings.TrimSpace(root.Description + " Also " + strings.Join(names, ", ") + ".")
}

// glossaryType is the one JSON type a glossary field is named with: an
// empty schema would encode as the bare true that the TypeScript SDK
// rejects.
func glossaryType(p *jsonschema.Schema) string {
	switch {
	case p.Type != "":
		return p.Type
	case len(p.Types) > 0:
		return p.Types[len(p.Types)-1] // ["null", "array"] is an array
	}
	return "string" // a described text property, whose type simplify dropped
}

// glossaryFields reduces every property of a result that the
// instructions' glossary describes (voice.Glossary: the IDs, action,
// summary, status, diff, times, actors…), at any depth, to its name: the
// agent reads what those fields mean once per conversation, not once per
// tool that returns them.
func glossaryFields(s *jsonschema.Schema) {
	if s == nil {
		return
	}
	for name, p := range s.Properties {
		if p == nil {
			continue
		}
		if voice.InGlossary(name) {
			s.Properties[name] = &jsonschema.Schema{Type: glossaryType(p)}
			continue
		}
		glossaryFields(p)
	}
}

// describeItems applies the last rule of compactOutput to every property
// of s, in the order of its fields; shapes maps an item shape already
// named in words to the property that names it.
func describeItems(s *jsonschema.Schema, shapes map[string]string) {
	if s == nil {
		return
	}
	for _, name := range propertyOrder(s) {
		p := s.Properties[name]
		if p == nil {
			continue
		}
		if p.Items != nil && len(p.Items.Properties) == 0 && p.Items.Type == "object" && p.Description != "" {
			p.Items = nil // a result of another tool's: the description says which
			continue
		}
		if p.Items != nil && len(p.Items.Properties) > 0 {
			shape := shapeOf(p.Items)
			words := "each " + shape
			if first, ok := shapes[shape]; ok {
				words = "each as in " + first
			} else {
				shapes[shape] = name
			}
			p.Description = strings.TrimSuffix(strings.TrimSpace(p.Description), ".")
			if p.Description != "" {
				p.Description += "; "
			}
			p.Description += words
			p.Items = nil // the words say what each item is
			continue
		}
		describeItems(p, shapes)
	}
}

// shapeOf names the fields of an object schema in words, in their order,
// with the items of a list of objects in brackets.
func shapeOf(s *jsonschema.Schema) string {
	var fields []string
	for _, name := range propertyOrder(s) {
		p := s.Properties[name]
		if p != nil && p.Items != nil && len(p.Items.Properties) > 0 {
			name += ": [" + shapeOf(p.Items) + "]"
		}
		fields = append(fields, name)
	}
	return "{" + strings.Join(fields, ", ") + "}"
}

// propertyOrder is the order of s's properties: the order of the Go
// struct's fields when jsonschema recorded it, else sorted.
func propertyOrder(s *jsonschema.Schema) []string {
	if len(s.PropertyOrder) == len(s.Properties) {
		return s.PropertyOrder
	}
	return slices.Sorted(maps.Keys(s.Properties))
}

// simplify applies the first three rules of compactOutput to s and every
// schema under it.
func simplify(s *jsonschema.Schema) {
	if s == nil {
		return
	}
	if isFalse(s.AdditionalProperties) && s.Properties != nil {
		s.AdditionalProperties = nil
	}
	for name, p := range s.Properties {
		if p == nil {
			continue
		}
		if len(p.Types) == 2 && p.Types[0] == "null" && (p.Types[1] == "array" || !slices.Contains(s.Required, name)) {
			p.Type, p.Types = p.Types[1], nil
		}
		if slices.Equal(p.Types, anyJSONTypes) && p.Description != "" {
			p.Types = nil
		}
		if p.Type == "string" && p.Description != "" && p.Enum == nil {
			p.Type = "" // text is what a described property is read as
		}
	}
	s.Required = nil // after the rule above, which reads it
	for _, p := range s.Properties {
		simplify(p)
	}
	simplify(s.Items)
	simplify(s.AdditionalProperties)
}

// isFalse reports whether s is the schema false as jsonschema infers it.
func isFalse(s *jsonschema.Schema) bool {
	return s != nil && s.Not != nil && reflect.ValueOf(*s.Not).IsZero()
}

// withApproval returns s, an output schema whose result may carry an
// "approval", without that property when keep is false: only a tool that
// can return one (under person approval) spends the bytes of its schema
// in every conversation.
func withApproval(s *jsonschema.Schema, keep bool) *jsonschema.Schema {
	if keep {
		return s
	}
	delete(s.Properties, "approval")
	s.PropertyOrder = slices.DeleteFunc(s.PropertyOrder, func(n string) bool { return n == "approval" })
	return s
}
