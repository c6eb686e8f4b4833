package dashboard

import (
	"errors"
	"fmt"
	"math"
	"net/url"
	"strconv"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/mcp-changeset/changeset-go/ledger"
)

// The list of changes takes its filters as GET query parameters, so that
// a filtered list is a link a person can bookmark or send:
//
//	q       text in the summary, action or resource (literal, any case;
//	        one or two characters search only the newest changes, see
//	        ledger.ChangeFilter.Text)
//	action  one operation, e.g. set_setting
//	status  one status, e.g. apply_failed
//	by      who previewed, applied or undid it: agent:alice, person:ana
//	since   updated within this long: 90m, 24h, 7d
//	run     one run's changes
//	before  the page cursor of the "Older" link
//
// Invalid values never reach the ledger: the page says what is wrong and
// answers 400.

// changePageSize is how many changes one page of a list shows.
const changePageSize = 50

// maxFilterValue bounds the action and by filters; longer values are
// refused rather than sent to the database.
const maxFilterValue = 200

// changeQuery is the filters of a list of changes as the person typed
// them, for the form and the links; html/template escapes them.
type changeQuery struct {
	Q, Action, Status, By, Since, RunID string
}

// myAgents is the filter of a person's own agents' work: the changes that
// agent:<name> previewed, applied or undid. An agent is a person's when
// its actor is "agent:<name>", that is when the server's bearer token file
// gives the person's agent the name the people file (or the trusted
// header) gives the person.
func myAgents(name string) changeQuery { return changeQuery{By: "agent:" + name} }

// values returns the query parameters of q, without the cursor.
func (q changeQuery) values() url.Values {
	v := url.Values{}
	for _, kv := range [][2]string{{"q", q.Q}, {"action", q.Action}, {"status", q.Status}, {"by", q.By}, {"since", q.Since}, {"run", q.RunID}} {
		if kv[1] != "" {
			v.Set(kv[0], kv[1])
		}
	}
	return v
}

// Filtered reports whether any filter is set.
func (q changeQuery) Filtered() bool { return len(q.values()) > 0 }

// link returns the path of the list with q's filters and the cursor
// before ("" for the newest page).
func (q changeQuery) link(before string) string {
	v := q.values()
	if before != "" {
		v.Set("before", before)
	}
	if len(v) == 0 {
		return "/changes"
	}
	return "/changes?" + v.Encode()
}

// filterError is an invalid filter: which one, and what is wrong, in
// words for the page.
type filterError struct {
	Field, Msg string
}

func (e *filterError) Error() string { return e.Msg }

// parseChangeQuery reads the filters of r's query into the ledger's
// filter, relative to now. It returns the filters as typed even when one
// is invalid, so that the form shows them.
func parseChangeQuery(v url.Values, now time.Time) (changeQuery, ledger.ChangeFilter, error) {
	q := changeQuery{
		Q: strings.TrimSpace(v.Get("q")), Action: strings.TrimSpace(v.Get("action")),
		Status: strings.TrimSpace(v.Get("status")), By: strings.TrimSpace(v.Get("by")),
		Since: strings.TrimSpace(v.Get("since")), RunID: strings.TrimSpace(v.Get("run")),
	}
	var f ledger.ChangeFilter
	fail := func(field, format string, args ...any) (changeQuery, ledger.ChangeFilter, error) {
		return q, ledger.ChangeFilter{}, &filterError{field, fmt.Sprintf(format, args...)}
	}
	if err := plainText(q.Q, ledger.MaxFilterText); err != nil {
		return fail("q", "The search text %s.", err)
	}
	f.Text = q.Q
	if err := plainText(q.Action, maxFilterValue); err != nil {
		return fail("action", "The action %s.", err)
	}
	f.Action = q.Action
	if q.Status != "" {
		if !ledger.Status(q.Status).Valid() {
			var names []string
			for _, s := range ledger.Statuses {
				names = append(names, string(s))
			}
			return fail("status", "There is no status %q. Choose one of: %s.", visible(cut(q.Status, 40)), strings.Join(names, ", "))
		}
		f.Statuses = []ledger.Status{ledger.Status(q.Status)}
	}
	if err := plainText(q.By, maxFilterValue); err != nil {
		return fail("by", "The name in “by” %s.", err)
	}
	f.By = q.By
	if q.Since != "" {
		d, err := parseDuration(q.Since)
		if err != nil {
			return fail("since", "“Updated within” %s.", err)
		}
		if d > maxSince {
			return fail("since", "“Updated within” is longer than 100 years; leave it empty to see every change.")
		}
		f.UpdatedSince = now.Add(-d)
	}
	if q.RunID != "" {
		if !validID(q.RunID, "run_") {
			return fail("run", "%q is not a run ID (they look like run_ followed by 20 hexadecimal digits).", visible(cut(q.RunID, 40)))
		}
		f.RunID = q.RunID
	}
	if b := v.Get("before"); b != "" {
		key, ok := parseCursor(b)
		if !ok {
			return fail("before", "This page link is damaged. Start again from the newest changes.")
		}
		f.Before = &key
	}
	return q, f, nil
}

// plainText checks a filter value: valid UTF-8, no control characters, at
// most max bytes. The error completes a sentence that names the filter.
func plainText(s string, max int) error {
	switch {
	case len(s) > max:
		return fmt.Errorf("is %d bytes long; at most %d are allowed", len(s), max)
	case !utf8.ValidString(s):
		return errors.New("is not valid UTF-8")
	case strings.ContainsFunc(s, func(r rune) bool { return unicode.IsControl(r) }):
		return errors.New("holds control characters")
	}
	return nil
}

// cut shortens s to at most n bytes, on a rune boundary, for quoting it.
func cut(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n] + "…"
}

// A cursor is a change's place in a list, newest first: its creation time
// in microseconds since the epoch, a dot, and its ID. It holds nothing
// secret; it only says where the next page starts.

func cursorOf(c *ledger.Change) string {
	return strconv.FormatInt(c.CreatedAt.UnixMicro(), 10) + "." + c.ID
}

func parseCursor(s string) (ledger.ChangeKey, bool) {
	micros, id, ok := strings.Cut(s, ".")
	if !ok || !validID(id, "chg_") {
		return ledger.ChangeKey{}, false
	}
	n, err := strconv.ParseInt(micros, 10, 64)
	if err != nil || n < 0 {
		return ledger.ChangeKey{}, false
	}
	return ledger.ChangeKey{CreatedAt: time.UnixMicro(n).UTC(), ID: id}, true
}

// maxSince bounds the since filter, so that now minus it stays a real
// time.
const maxSince = 100 * 365 * day

// day is the length of the "d" unit of parseDuration.
const day = 24 * time.Hour

// parseDuration reads a length of time as people write it, the same way
// the mcp-changeset CLI's --since does: a Go duration ("90m", "1h30m"), a
// whole number of days ("7d"), or days followed by a Go duration
// ("1d12h"). A day is 24 hours. The error completes a sentence that names
// the field.
func parseDuration(s string) (time.Duration, error) {
	const example = "write e.g. 90m, 24h or 7d"
	if strings.HasPrefix(s, "-") {
		return 0, fmt.Errorf("cannot be negative (%s)", example)
	}
	var days time.Duration
	if i := strings.IndexByte(s, 'd'); i >= 0 {
		n, err := strconv.ParseUint(s[:i], 10, 64)
		if err != nil || i == 0 {
			return 0, fmt.Errorf("is not a length of time: days are a whole number before d (%s)", example)
		}
		if n > uint64(math.MaxInt64/int64(day)) {
			return 0, errors.New("is too long")
		}
		days, s = time.Duration(n)*day, s[i+1:]
		if s == "" {
			return days, nil
		}
	}
	d, err := time.ParseDuration(s)
	if err != nil {
		return 0, fmt.Errorf("is not a length of time (%s)", example)
	}
	if d < 0 {
		return 0, fmt.Errorf("cannot be negative (%s)", example)
	}
	if d > math.MaxInt64-days {
		return 0, errors.New("is too long")
	}
	return days + d, nil
}
