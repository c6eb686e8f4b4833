package notify_test

import (
	"encoding/json"
	"io"
	"log"
	"net/http"

	"github.com/mcp-changeset/changeset-go/notify"
)

// A receiver checks the signature on the raw body before it trusts it,
// and drops a delivery it has seen (a retry after a lost answer).
func ExampleVerify() {
	secret := []byte("the content of the --notify-secret-file, trimmed")
	seen := map[string]bool{} // keep this in a database in a real receiver
	http.HandleFunc("POST /changeset", func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(io.LimitReader(r.Body, 64<<10))
		if err != nil || !notify.Verify(secret, body, r.Header.Get(notify.HeaderSignature)) {
			http.Error(w, "bad signature", http.StatusUnauthorized)
			return
		}
		id := r.Header.Get(notify.HeaderDelivery)
		if seen[id] {
			w.WriteHeader(http.StatusNoContent) // a retry: answer 2xx, do nothing
			return
		}
		seen[id] = true
		var e struct {
			Event, Summary, URL string
			RequestedBy         string `json:"requested_by"`
		}
		if err := json.Unmarshal(body, &e); err != nil {
			http.Error(w, "bad body", http.StatusBadRequest)
			return
		}
		if e.Event == "approval.requested" {
			log.Printf("%s asks: %s — approve at %s", e.RequestedBy, e.Summary, e.URL)
		}
		w.WriteHeader(http.StatusNoContent)
	})
}
