package dashboard

import (
	"bytes"
	"context"
	"embed"
	"encoding/json"
	"errors"
	"fmt"
	"html/template"
	"io/fs"
	"net/http"
	"net/url"
	"strings"

	changeset "github.com/mcp-changeset/changeset-go"
	"github.com/mcp-changeset/changeset-go/ledger"
)

//go:embed templates/*.html
var templateFS embed.FS

//go:embed assets
var assetFS embed.FS

// pageNames are the templates in templates/, each rendered inside
// layout.html.
var pageNames = []string{"runs", "run", "dryrun", "changes", "change", "approvals", "approval", "error"}

// moreItems is the data of the "more" template: a section of N entries
// shows Shown of them.
type moreItems struct{ N, Shown int }

// pages holds one parsed template set per page.
type pages struct {
	t map[string]*template.Template
}

func parsePages() (*pages, error) {
	funcs := template.FuncMap{
		"label": func(s string) string { return strings.ReplaceAll(s, "_", " ") },
		"sub":   func(a, b int) int { return a - b },
		"more":  func(n, shown int) moreItems { return moreItems{N: n, Shown: shown} },
	}
	p := &pages{t: map[string]*template.Template{}}
	for _, name := range pageNames {
		t, err := template.New("layout.html").Funcs(funcs).ParseFS(templateFS,
			"templates/layout.html", "templates/parts.html", "templates/"+name+".html")
		if err != nil {
			return nil, err
		}
		p.t[name] = t
	}
	return p, nil
}

func assetServer() http.Handler {
	sub, err := fs.Sub(assetFS, "assets")
	if err != nil {
		panic(err) // the embedded directory exists
	}
	return http.FileServerFS(sub)
}

// page is what every template receives.
type page struct {
	Title    string
	Nav      string // the highlighted section: "runs", "changes" or "approvals"
	SignedIn bool
	// Person is who acts, as the ledger records it ("person:ana"); Name
	// is their name alone. ViaProxy says the trusted header named them,
	// so that signing out is the proxy's business.
	Person, Name string
	ViaProxy     bool
	// MyAgents links to the changes of the person's own agents
	// (agent:<name>), or is "" when nobody in particular signed in.
	MyAgents string
	CSRF     string
	Flash    string // a success message
	Problem  string // a refusal or failure, shown prominently
	Writes   bool   // whether undo may write now
	// Waiting counts the approvals waiting for people, for the
	// navigation; WaitingMore says there are more than it.
	Waiting     int
	WaitingMore bool
	Data        any
}

// render writes a page with status code. Rendering into a buffer first
// means a template error never leaves a half-written page.
func (d *Dashboard) render(w http.ResponseWriter, r *http.Request, code int, name string, p page) {
	if s := sessionOf(r); s != nil {
		name, named := d.identify(r)
		p.SignedIn, p.CSRF, p.Person, p.Name, p.ViaProxy = true, s.csrf, changeset.Person(name), name, s.header
		if named {
			p.MyAgents = myAgents(name).link("")
		}
		if p.Flash == "" {
			p.Flash = d.sessions.takeFlash(s.id)
		}
		if p.Waiting = d.waiting(r.Context()); p.Waiting > maxWaitingCount {
			p.Waiting, p.WaitingMore = maxWaitingCount, true
		}
	}
	p.Writes = d.guard.WritesEnabled()
	var b bytes.Buffer
	if err := d.pages.t[name].Execute(&b, p); err != nil {
		d.opts.Logger.Error("dashboard: render", "page", name, "err", err)
		http.Error(w, "internal error", http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.WriteHeader(code)
	w.Write(b.Bytes())
}

// errorPage is the data of the error template.
type errorPage struct {
	Code       int
	Title      string
	Hint       string
	StatusText string
}

func (d *Dashboard) renderError(w http.ResponseWriter, r *http.Request, code int, title, hint string) {
	d.render(w, r, code, "error", page{Title: title, Data: errorPage{code, title, hint, http.StatusText(code)}})
}

func (d *Dashboard) notFound(w http.ResponseWriter, r *http.Request) {
	d.renderError(w, r, http.StatusNotFound, "Not found", "There is no such page, run or change in this ledger.")
}

// internalError logs err for the operator and shows a page without it.
func (d *Dashboard) internalError(w http.ResponseWriter, r *http.Request, err error) {
	d.opts.Logger.Error("dashboard: request failed", "path", r.URL.Path, "err", err)
	d.renderError(w, r, http.StatusInternalServerError, "Something went wrong",
		"The dashboard could not read the ledger. The server's log has the details.")
}

// runsData is the data of the runs page.
type runsData struct {
	Runs []runView
	// Older is the last run of this page, where the next page starts
	// ("": this is the last page); Newer says this is not the first page.
	Older string
	Newer bool
	// By is the actor whose runs the page lists ("": everyone's); Mine
	// is the signed-in person's agents' actor ("" when nobody in
	// particular signed in), and MineActive says By is Mine.
	By, Mine   string
	MineActive bool
}

// runsPageSize is how many runs one page of the runs list shows.
const runsPageSize = 50

func (d *Dashboard) runsPage(w http.ResponseWriter, r *http.Request) {
	ctx, v := r.Context(), d.viewer()
	f := ledger.RunFilter{Limit: runsPageSize + 1}
	data := runsData{Runs: []runView{}}
	if name, named := d.identify(r); named {
		data.Mine = myAgents(name).By
	}
	if by := strings.TrimSpace(r.URL.Query().Get("by")); by != "" {
		if err := plainText(by, maxFilterValue); err != nil {
			d.renderError(w, r, http.StatusBadRequest, "No such filter", "The name in “by” "+err.Error()+".")
			return
		}
		f.StartedBy, data.By, data.MineActive = by, by, by == data.Mine
	}
	if id := r.URL.Query().Get("before"); id != "" {
		after, err := d.guard.Ledger().Run(ctx, id)
		if errors.Is(err, ledger.ErrNotFound) {
			d.renderError(w, r, http.StatusBadRequest, "No such page",
				"The page started after a run that is not in the ledger (pruned, or a mistyped link). Start again from the newest runs.")
			return
		}
		if err != nil {
			d.internalError(w, r, err)
			return
		}
		f.Before, data.Newer = &ledger.ChangeKey{CreatedAt: after.CreatedAt, ID: after.ID}, true
	}
	runs, err := d.guard.Ledger().Runs(ctx, f)
	if err != nil {
		d.internalError(w, r, err)
		return
	}
	if len(runs) > runsPageSize {
		runs = runs[:runsPageSize]
		data.Older = runs[len(runs)-1].ID
	}
	for _, run := range runs {
		tallies, err := d.guard.Ledger().TallyChanges(ctx, ledger.ChangeFilter{RunID: run.ID})
		if err != nil {
			d.internalError(w, r, err)
			return
		}
		rv := v.runSummary(run, tallies)
		if run.StartedBy != "" {
			rv.StartedBy = parseActor(run.StartedBy)
		}
		data.Runs = append(data.Runs, rv)
	}
	d.render(w, r, http.StatusOK, "runs", page{Title: "Runs", Nav: "runs", Data: data})
}

// runData is the data of the run page and of the dry-run page.
type runData struct {
	Run     runView
	Changes []changeView
	// Timeline is a page of the run's history; StartedBy names who
	// started the run, from its first history entry (nil: nobody known).
	Timeline   timelineView
	StartedBy  *actor
	Report     *reportView
	CanDryRun  bool
	AnyApplied bool
	// Older is the cursor of the next page of changes ("" on the last);
	// Newer says the page does not start at the newest change.
	Older string
	Newer bool
	// PageNote says which of the run's changes the page shows, when they
	// do not fit on one page: "51–100 of 2000".
	PageNote string
	// Waiting are the approvals of the run's undo that wait for people.
	Waiting []approvalView
}

// runPageSize is how many changes a run's page shows.
const runPageSize = changePageSize

// loadRun reads a run and its changes; it writes a 404 or 500 page and
// returns ok=false when it cannot.
func (d *Dashboard) loadRun(w http.ResponseWriter, r *http.Request) (*ledger.Run, []*ledger.Change, bool) {
	run, ok := loadByID(d, w, r, "run_", d.guard.Ledger().Run)
	if !ok {
		return nil, nil, false
	}
	ctx, id := r.Context(), run.ID
	changes, err := d.guard.Ledger().Changes(ctx, ledger.ChangeFilter{RunID: id})
	if err != nil {
		d.internalError(w, r, err)
		return nil, nil, false
	}
	return run, changes, true
}

// pageOf returns the page of changes (newest first) that starts after the
// change before ("" for the first page), and sets data's links.
func pageOf(changes []*ledger.Change, before string, data *runData) []*ledger.Change {
	start := 0
	if before != "" {
		for i, c := range changes {
			if c.ID == before {
				start, data.Newer = i+1, true
				break
			}
		}
	}
	end := min(start+runPageSize, len(changes))
	if end < len(changes) {
		data.Older = changes[end-1].ID
	}
	if end < len(changes) || start > 0 {
		data.PageNote = fmt.Sprintf("%d–%d of %d", start+1, end, len(changes))
	}
	return changes[start:end]
}

func (d *Dashboard) runData(ctx context.Context, run *ledger.Run, changes []*ledger.Change, q url.Values) (runData, error) {
	v := d.viewer()
	data := runData{Run: v.run(run, changes), CanDryRun: run.Status == ledger.RunOpen}
	names := summaries(changes)
	tl, first, err := d.runTimeline(ctx, run.ID, timelineCursor(q.Get("tl")), names)
	if err != nil {
		return data, err
	}
	data.Timeline = tl
	if data.Waiting, err = d.waitingFor(ctx, ledger.ApprovalFilter{RunID: run.ID}); err != nil {
		return data, err
	}
	if first != nil {
		data.StartedBy = parseActor(first.By)
	}
	before := q.Get("before")
	for _, c := range changes {
		data.AnyApplied = data.AnyApplied || c.Status == ledger.Applied
	}
	for _, c := range pageOf(changes, before, &data) {
		data.Changes = append(data.Changes, v.change(c))
	}
	if run.Report != nil {
		var rep changeset.RunReport
		if err := json.Unmarshal(run.Report, &rep); err != nil {
			return data, err
		}
		rep.ConfirmationToken = "" // a stored report never holds one; be certain
		data.Report = report(&rep, names)
	}
	return data, nil
}

func (d *Dashboard) runPage(w http.ResponseWriter, r *http.Request) {
	run, changes, ok := d.loadRun(w, r)
	if !ok {
		return
	}
	d.renderRun(w, r, http.StatusOK, run, changes, "")
}

func (d *Dashboard) renderRun(w http.ResponseWriter, r *http.Request, code int, run *ledger.Run, changes []*ledger.Change, problem string) {
	data, err := d.runData(r.Context(), run, changes, r.URL.Query())
	if err != nil {
		d.internalError(w, r, err)
		return
	}
	d.render(w, r, code, "run", page{Title: "Run " + data.Run.Label, Nav: "runs", Problem: problem, Data: data})
}

// changesData is the data of the changes page.
type changesData struct {
	Query    changeQuery
	Statuses []string
	Changes  []changeView
	// Invalid names the filter that is wrong ("" when all are valid).
	Invalid string
	// Older is the link to the next page ("" on the last); Newest the
	// link to the first ("" on it).
	Older, Newest string
	// Mine is the actor of the signed-in person's agents ("agent:ana"),
	// or "" when nobody in particular signed in; MineActive says the list
	// shows just their work.
	Mine       string
	MineActive bool
}

func (d *Dashboard) changesPage(w http.ResponseWriter, r *http.Request) {
	v := d.viewer()
	q, f, err := parseChangeQuery(r.URL.Query(), v.now)
	data := changesData{Query: q}
	for _, s := range ledger.Statuses {
		data.Statuses = append(data.Statuses, string(s))
	}
	if name, named := d.identify(r); named {
		data.Mine = myAgents(name).By
		data.MineActive = q.By == data.Mine
	}
	var fe *filterError
	if errors.As(err, &fe) {
		data.Invalid = fe.Field
		d.render(w, r, http.StatusBadRequest, "changes", page{Title: "Changes", Nav: "changes", Problem: fe.Msg, Data: data})
		return
	}
	f.Limit = changePageSize + 1
	changes, err := d.guard.Ledger().Changes(r.Context(), f)
	if err != nil {
		d.internalError(w, r, err)
		return
	}
	if len(changes) > changePageSize {
		changes = changes[:changePageSize]
		data.Older = q.link(cursorOf(changes[len(changes)-1]))
	}
	if f.Before != nil {
		data.Newest = q.link("")
	}
	labels, err := d.runLabels(r.Context(), changes)
	if err != nil {
		d.internalError(w, r, err)
		return
	}
	for _, c := range changes {
		cv := v.change(c)
		cv.RunLabel = labels[c.RunID]
		data.Changes = append(data.Changes, cv)
	}
	d.render(w, r, http.StatusOK, "changes", page{Title: "Changes", Nav: "changes", Data: data})
}

// runLabels returns the label of the run of each change (by run ID), one
// read per distinct run: a page of 50 changes usually belongs to a few.
// A run that is gone (pruned) gets no label.
func (d *Dashboard) runLabels(ctx context.Context, changes []*ledger.Change) (map[string]string, error) {
	labels := map[string]string{}
	for _, c := range changes {
		if c.RunID == "" {
			continue
		}
		if _, done := labels[c.RunID]; done {
			continue
		}
		run, err := d.guard.Ledger().Run(ctx, c.RunID)
		switch {
		case errors.Is(err, ledger.ErrNotFound):
			labels[c.RunID] = ""
		case err != nil:
			return nil, err
		default:
			labels[c.RunID] = visible(run.Label)
		}
	}
	return labels, nil
}

// changeData is the data of the change page.
type changeData struct {
	Change   changeView
	RunLabel string
	Timeline timelineView
	// Waiting are the change's approvals that wait for people.
	Waiting []approvalView
}

func (d *Dashboard) changePage(w http.ResponseWriter, r *http.Request) {
	d.renderChange(w, r, http.StatusOK, "")
}

func (d *Dashboard) renderChange(w http.ResponseWriter, r *http.Request, code int, problem string) {
	c, ok := d.loadChange(w, r)
	if !ok {
		return
	}
	data := changeData{Change: d.viewer().change(c)}
	tl, err := d.changeTimeline(r.Context(), c)
	if err != nil {
		d.internalError(w, r, err)
		return
	}
	data.Timeline = tl
	if data.Waiting, err = d.waitingFor(r.Context(), ledger.ApprovalFilter{ChangeID: c.ID}); err != nil {
		d.internalError(w, r, err)
		return
	}
	if c.RunID != "" {
		if run, err := d.guard.Ledger().Run(r.Context(), c.RunID); err == nil {
			data.RunLabel = visible(run.Label)
		}
	}
	title := data.Change.Summary
	if title == "" {
		title = data.Change.Action
	}
	d.render(w, r, code, "change", page{Title: title, Nav: "changes", Problem: problem, Data: data})
}

// loadChange reads the change named in the path; it writes a 404 or 500
// page and returns ok=false when it cannot.
func (d *Dashboard) loadChange(w http.ResponseWriter, r *http.Request) (*ledger.Change, bool) {
	return loadByID(d, w, r, "chg_", d.guard.Ledger().Change)
}

// loadByID reads the row named by the path's id, which must carry prefix,
// with get; it writes a 404 page for a malformed or unknown ID, a 500
// page for any other error, and then returns ok=false.
func loadByID[T any](d *Dashboard, w http.ResponseWriter, r *http.Request, prefix string, get func(context.Context, string) (T, error)) (T, bool) {
	var zero T
	id := r.PathValue("id")
	if !validID(id, prefix) {
		d.notFound(w, r)
		return zero, false
	}
	v, err := get(r.Context(), id)
	if errors.Is(err, ledger.ErrNotFound) {
		d.notFound(w, r)
		return zero, false
	}
	if err != nil {
		d.internalError(w, r, err)
		return zero, false
	}
	return v, true
}

func (d *Dashboard) viewer() viewer { return viewer{now: d.opts.Now()} }

// validID reports whether id is prefix followed by 20 lowercase hex
// characters, the form of every change and run ID.
func validID(id, prefix string) bool {
	hex, ok := strings.CutPrefix(id, prefix)
	if !ok || len(hex) != 20 {
		return false
	}
	for _, c := range hex {
		if (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return false
		}
	}
	return true
}

// contextWithSession returns r's context carrying s.
func contextWithSession(r *http.Request, s *session) context.Context {
	return context.WithValue(r.Context(), sessionCtxKey{}, s)
}
