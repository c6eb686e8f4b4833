package changeset

import (
	"reflect"
	"slices"
	"strings"
)

// redactFields returns the JSON names of P's fields tagged
// `changeset:"redact"`. The ledger replaces their values by keyed hashes
// once a change is terminal (see ledger.RedactChange): mark secrets an
// operation needs for Apply and Undo but operators should not read later.
//
//	type Payload struct {
//		User     string `json:"user"`
//		Password string `json:"password" changeset:"redact"`
//	}
func redactFields[P any]() []string {
	t := reflect.TypeFor[P]()
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if t.Kind() != reflect.Struct {
		return nil
	}
	var names []string
	for f := range t.Fields() {
		if !f.IsExported() || !slices.Contains(strings.Split(f.Tag.Get("changeset"), ","), "redact") {
			continue
		}
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		switch name {
		case "-":
			continue
		case "":
			name = f.Name
		}
		names = append(names, name)
	}
	return names
}
