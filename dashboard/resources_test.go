package dashboard

import (
	"encoding/json"
	"testing"

	changeset "github.com/mcp-changeset/changeset-go"
)

// A change that names several resources is named by the first few and a
// count, and the drift of its skip says which resource each field is of.
func TestResourceTextAndDriftRows_ChangeOfSeveralResources(t *testing.T) {
	for _, tc := range []struct {
		one     string
		several []string
		want    string
	}{
		{"note:a", nil, "note:a"},
		{"", []string{"row:1", "row:2"}, "row:1, row:2"},
		{"", []string{"row:1", "row:2", "row:3", "row:4", "row:5"}, "row:1, row:2, row:3 and 2 more"},
	} {
		if got := resourceText(tc.one, tc.several); got != tc.want {
			t.Errorf("resourceText(%q, %q) = %q, want %q", tc.one, tc.several, got, tc.want)
		}
	}
	rows := driftRows([]changeset.Drift{
		{Resource: "product:TEA-002", Field: "price_cents", Expected: json.RawMessage("1375"), Found: json.RawMessage("1234")},
		{Field: "theme", Expected: json.RawMessage(`"dark"`), Found: json.RawMessage(`"blue"`)},
	})
	if len(rows) != 2 || rows[0].Field != "product:TEA-002 · price_cents" || rows[1].Field != "theme" {
		t.Fatalf("drift rows = %+v, want the first named by its resource and field, the second by its field", rows)
	}
}
