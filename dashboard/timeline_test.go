package dashboard_test

import (
	"context"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/mcp-changeset/changeset-go/ledger"
)

// evLine matches one line of a timeline: its sequence number and body.
var evLine = regexp.MustCompile(`(?s)<li class="ev ev-([a-z]+)" data-seq="(\d+)">(.*?)</li>`)

// timelineOf returns the lines of the timeline on a page: seq → body, and
// the seqs in page order.
func timelineOf(t *testing.T, body string) (lines map[int64]string, order []int64) {
	t.Helper()
	i := strings.Index(body, `id="timeline"`)
	if i < 0 {
		t.Fatalf("the page has no timeline:\n%.2000s", body)
	}
	lines = map[int64]string{}
	for _, m := range evLine.FindAllStringSubmatch(body[i:], -1) {
		seq, _ := strconv.ParseInt(m[2], 10, 64)
		lines[seq] = m[3]
		order = append(order, seq)
	}
	return lines, order
}

// A change's page shows every entry of its history, in order, with who
// made it, the absolute time beside the relative one, and the note (here
// the kind of the failure).
func TestChangePage_TimelineIsTheHistory(t *testing.T) {
	f := newFixture(t)
	s := f.build()
	c := f.login()
	for _, id := range []string{s.changes[0], s.failed, s.pending} {
		history, err := f.guard.Ledger().History(context.Background(), ledger.HistoryFilter{ChangeID: id})
		if err != nil || len(history) == 0 {
			t.Fatalf("history of %s: %v, %v", id, history, err)
		}
		lines, order := timelineOf(t, c.get("/changes/"+id).Body)
		if len(order) != len(history) {
			t.Fatalf("change %s: the timeline has %d lines, the history %d", id, len(order), len(history))
		}
		for i, e := range history {
			if order[i] != e.Seq {
				t.Fatalf("change %s: line %d is entry %d, want %d (the history's order)", id, i, order[i], e.Seq)
			}
			line := lines[e.Seq]
			abs := e.At.UTC().Format("2006-01-02 15:04:05 UTC")
			if !regexp.MustCompile(regexp.QuoteMeta(abs) + `</time> <span class="rel" data-rel="[^"]+">\(\d+ min ago\)</span>`).MatchString(line) {
				t.Errorf("change %s, %s→%s: no absolute time %s beside a relative one:\n%s", id, e.From, e.To, abs, line)
			}
			if e.By != "" && !strings.Contains(line, `by <span class="who agent" title="an agent, with a token">`+e.By+`</span>`) {
				t.Errorf("change %s, %s→%s: does not say %s made it:\n%s", id, e.From, e.To, e.By, line)
			}
			if ledger.Failure(e.Note).Valid() { // a failure's kind is said in words, not as a note
				if strings.Contains(line, `<div class="note">`) || !strings.Contains(line, "failed: the operation returned an error") {
					t.Errorf("change %s, %s→%s: the failure %q is not in words:\n%s", id, e.From, e.To, e.Note, line)
				}
			} else if e.Note != "" && !strings.Contains(line, `<div class="note">`+e.Note+`</div>`) {
				t.Errorf("change %s, %s→%s: lacks the note %q:\n%s", id, e.From, e.To, e.Note, line)
			}
		}
	}
	body := c.get("/changes/" + s.failed).Body
	mustContain(t, "failed change's timeline", body, "Apply failed: the operation returned an error")
}

// A run's timeline shows the newest 100 transitions, says how many
// earlier ones it leaves out, and links to them a page at a time; every
// transition is on exactly one page, in order.
func TestRunPage_TimelineIsBoundedAndPaged(t *testing.T) {
	f := newFixture(t)
	run := f.startRun("Many")
	for i := range 230 {
		f.preview(run, "set_value", fmt.Sprintf("k%03d", i), "v")
	}
	history, err := f.guard.Ledger().History(context.Background(), ledger.HistoryFilter{RunID: run})
	if err != nil || len(history) != 231 {
		t.Fatalf("history of the run: %d entries, %v; want 231", len(history), err)
	}
	c := f.login()
	earlier := regexp.MustCompile(`(\d+) earlier transitions not shown\. <a href="(/runs/` + run + `\?tl=\d+)#timeline">`)
	var seen []int64
	next, wantEarlier := "/runs/"+run, []int{131, 31, 0}
	for page := 0; next != ""; page++ {
		if page == len(wantEarlier) {
			t.Fatal("more timeline pages than expected")
		}
		body := c.get(next).Body
		if len(body) > 1<<20 {
			t.Errorf("page %d is %d bytes", page, len(body))
		}
		_, order := timelineOf(t, body)
		if len(order) > 100 {
			t.Fatalf("page %d shows %d transitions", page, len(order))
		}
		seen = append(order, seen...)
		next = ""
		if m := earlier.FindStringSubmatch(body); m != nil {
			if n, _ := strconv.Atoi(m[1]); n != wantEarlier[page] {
				t.Errorf("page %d says %s earlier transitions, want %d", page, m[1], wantEarlier[page])
			}
			next = m[2]
		} else if wantEarlier[page] != 0 {
			t.Errorf("page %d has no link to the %d earlier transitions", page, wantEarlier[page])
		}
		if page > 0 && !strings.Contains(body, `<a href="/runs/`+run+`#timeline">Show the latest</a>`) {
			t.Errorf("page %d has no link back to the latest transitions", page)
		}
	}
	if len(seen) != len(history) {
		t.Fatalf("the pages showed %d transitions, the history has %d", len(seen), len(history))
	}
	for i, e := range history {
		if seen[i] != e.Seq {
			t.Fatalf("transition %d is entry %d, want %d", i, seen[i], e.Seq)
		}
	}
	if res := c.get("/runs/" + run + "?tl=bogus"); res.Code != 200 || !strings.Contains(res.Body, "131 earlier transitions") {
		t.Errorf("a malformed tl does not show the newest page (%d)", res.Code)
	}
}

// The run page names who started the run, from its first history entry:
// the agent that called start_run, nobody for trusted code.
func TestRunPage_NamesWhoStartedTheRun(t *testing.T) {
	f := newFixture(t)
	byAgent, _ := f.callTool("start_run", map[string]any{"label": "By the agent"})["run_id"].(string)
	byCode := f.startRun("By trusted code")
	c := f.login()
	started := regexp.MustCompile(`Started <span class="stamp"><time[^>]*>[^<]*</time> <span class="rel"[^>]*>[^<]*</span></span> by <span class="who agent"[^>]*>agent:agent</span>`)
	if body := c.get("/runs/" + byAgent).Body; !started.MatchString(body) {
		t.Errorf("the run the agent started does not name it:\n%.3000s", body)
	}
	if body := c.get("/runs/" + byCode).Body; strings.Contains(body, "</span></span> by <span") {
		t.Error("a run started by trusted code names someone as its starter")
	}
}
