package changeset

import (
	"cmp"
	"encoding/json"
	"fmt"
	"maps"
	"math/big"
	"reflect"
	"slices"

	"github.com/google/jsonschema-go/jsonschema"
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
	names, err := structSchemaNames(t, opts)
	if err != nil {
		panic(fmt.Sprintf("changeset: output schema of %v: %v", t, err))
	}
	compactOutput(s, names)
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
	return opts
}

// compactOutput rewrites an inferred output schema in place, accepting
// exactly the same results (only ever produced by the server's own
// encoding of its Go types):
//
//   - "additionalProperties": false goes: it constrains only what the
//     server itself sends, and a client learns nothing from it;
//   - an optional property's ["null", T] becomes T: encoding/json leaves
//     out a nil slice or pointer that is omitempty or omitzero, it never
//     sends null for it;
//   - a property that lists every JSON type and has a description keeps
//     the description alone (the same schema, an object rather than the
//     bare true the TypeScript SDK rejects);
//   - an object schema that occurs more than once (the items of a run
//     report's lists, a drift entry) is defined once under "$defs",
//     named after its Go type, and referred to with "$ref".
func compactOutput(root *jsonschema.Schema, names map[string]string) {
	simplify(root)
	hoistRepeated(root, names)
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
		if len(p.Types) == 2 && p.Types[0] == "null" && !slices.Contains(s.Required, name) {
			p.Type, p.Types = p.Types[1], nil
		}
		if slices.Equal(p.Types, anyJSONTypes) && p.Description != "" {
			p.Types = nil
		}
	}
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

// hoistRepeated defines every object schema that occurs more than once
// under root (outside root itself) once in root.Defs, largest first, and
// replaces each occurrence with a reference. names maps a struct type's
// schema, encoded, to the name of its definition; a schema not in it is
// named "def1", "def2"...
func hoistRepeated(root *jsonschema.Schema, names map[string]string) {
	for {
		counts := map[string]int{}
		eachChild(root, func(c *jsonschema.Schema) {
			if c.Type == "object" && len(c.Properties) > 0 {
				counts[encode(c)]++
			}
		})
		best := ""
		for enc, n := range counts {
			if n < 2 {
				continue
			}
			if best == "" || len(enc) > len(best) || (len(enc) == len(best) && enc < best) {
				best = enc
			}
		}
		if best == "" {
			return
		}
		name := names[best]
		for i := 1; name == "" || root.Defs[name] != nil; i++ {
			name = fmt.Sprintf("def%d", i)
		}
		var def *jsonschema.Schema
		eachChild(root, func(c *jsonschema.Schema) {
			if def == nil && encode(c) == best {
				def = c.CloneSchemas()
			}
		})
		if root.Defs == nil {
			root.Defs = map[string]*jsonschema.Schema{}
		}
		root.Defs[name] = def
		ref := "#/$defs/" + name
		replaceChildren(root, func(c *jsonschema.Schema) *jsonschema.Schema {
			if encode(c) == best {
				return &jsonschema.Schema{Ref: ref}
			}
			return nil
		})
	}
}

// eachChild calls f on every schema under s (properties, items, map values
// and definitions), but not on s itself nor on a definition itself.
func eachChild(s *jsonschema.Schema, f func(*jsonschema.Schema)) {
	var walk func(c *jsonschema.Schema)
	walk = func(c *jsonschema.Schema) {
		if c == nil {
			return
		}
		f(c)
		eachChild(c, f)
	}
	for _, name := range slices.Sorted(maps.Keys(s.Properties)) {
		walk(s.Properties[name])
	}
	walk(s.Items)
	walk(s.AdditionalProperties)
	for _, name := range slices.Sorted(maps.Keys(s.Defs)) {
		eachChild(s.Defs[name], f)
	}
}

// replaceChildren replaces every schema under s (as eachChild visits them)
// for which f returns a schema, and looks inside the others.
func replaceChildren(s *jsonschema.Schema, f func(*jsonschema.Schema) *jsonschema.Schema) {
	replace := func(c *jsonschema.Schema) *jsonschema.Schema {
		if c == nil {
			return nil
		}
		if r := f(c); r != nil {
			return r
		}
		replaceChildren(c, f)
		return c
	}
	for name, p := range s.Properties {
		s.Properties[name] = replace(p)
	}
	s.Items = replace(s.Items)
	s.AdditionalProperties = replace(s.AdditionalProperties)
	for _, d := range s.Defs {
		replaceChildren(d, f)
	}
}

// encode renders s as JSON, the key by which equal schemas are found.
func encode(s *jsonschema.Schema) string {
	b, err := json.Marshal(s)
	if err != nil {
		panic(fmt.Sprintf("changeset: schema does not encode: %v", err))
	}
	return string(b)
}

// structSchemaNames maps the schema of every named struct type that t
// holds (through fields, pointers, slices, arrays and map values),
// inferred with opts and simplified, encoded, to the type's name.
func structSchemaNames(t reflect.Type, opts *jsonschema.ForOptions) (map[string]string, error) {
	names := map[string]string{}
	seen := map[reflect.Type]bool{}
	var visit func(t reflect.Type, root bool) error
	visit = func(t reflect.Type, root bool) error {
		for t.Kind() == reflect.Pointer || t.Kind() == reflect.Slice || t.Kind() == reflect.Array || t.Kind() == reflect.Map {
			t = t.Elem()
		}
		if t.Kind() != reflect.Struct || seen[t] || opts.TypeSchemas[t] != nil {
			return nil
		}
		seen[t] = true
		if !root && t.Name() != "" {
			s, err := jsonschema.ForType(t, opts)
			if err != nil {
				return err
			}
			simplify(s)
			enc := encode(s)
			names[enc] = cmp.Or(names[enc], t.Name())
		}
		for _, f := range reflect.VisibleFields(t) {
			if f.IsExported() && !f.Anonymous {
				if err := visit(f.Type, false); err != nil {
					return err
				}
			}
		}
		return nil
	}
	return names, visit(t, true)
}
