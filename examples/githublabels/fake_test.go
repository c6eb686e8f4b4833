package main

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"sync"
	"testing"
)

// fakeToken is the token the fake GitHub accepts.
const fakeToken = "ghp_fake0123456789abcdefghijklmnopqrstuv"

// fakeGitHub is a GitHub REST API on loopback with just the calls the
// example makes. It records every request; anything else fails the test.
type fakeGitHub struct {
	t   *testing.T
	srv *httptest.Server

	mu       sync.Mutex
	labels   map[string][]string // "owner/name" → the repository's labels
	issues   map[string][]string // "owner/name#n" → the issue's labels
	requests []string            // "GET /repos/octo/hello/issues/1"
	puts     [][]string          // every label set PUT, in order
	fail     map[string]failure  // "METHOD path" → the answer to give instead
	// afterGet, when set, runs (under mu) after every answered GET of an
	// issue, with the number of such GETs so far.
	afterGet func(key string, n int)
	gets     int
}

type failure struct {
	status int
	header map[string]string
}

func newFakeGitHub(t *testing.T) *fakeGitHub {
	f := &fakeGitHub{t: t, labels: map[string][]string{}, issues: map[string][]string{}, fail: map[string]failure{}}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /repos/{owner}/{name}/issues/{n}", f.getIssue)
	mux.HandleFunc("GET /repos/{owner}/{name}/labels", f.getLabels)
	mux.HandleFunc("PUT /repos/{owner}/{name}/issues/{n}/labels", f.putLabels)
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		t.Errorf("fake GitHub: unexpected request %s %s", r.Method, r.URL)
		http.NotFound(w, r)
	})
	f.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		f.mu.Lock()
		key := r.Method + " " + r.URL.Path
		f.requests = append(f.requests, key)
		fail, failing := f.fail[key]
		f.mu.Unlock()
		if r.Header.Get("Authorization") != "Bearer "+fakeToken {
			t.Errorf("fake GitHub: %s without the token", key)
			http.Error(w, `{"message":"Bad credentials"}`, http.StatusUnauthorized)
			return
		}
		if failing {
			for k, v := range fail.header {
				w.Header().Set(k, v)
			}
			http.Error(w, `{"message":"injected failure"}`, fail.status)
			return
		}
		mux.ServeHTTP(w, r)
	}))
	t.Cleanup(f.srv.Close)
	return f
}

// addRepo creates a repository with labels and issues (number → labels).
func (f *fakeGitHub) addRepo(name string, labels []string, issues map[int][]string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.labels[name] = labels
	for n, l := range issues {
		f.issues[fmt.Sprintf("%s#%d", name, n)] = sorted(l)
	}
}

// setIssue changes an issue's labels as a person on github.com would.
func (f *fakeGitHub) setIssue(key string, labels ...string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.issues[key] = sorted(labels)
}

func (f *fakeGitHub) issue(key string) []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.issues[key])
}

// failWith makes every "METHOD path" request get status (and headers)
// until cleared with status 0.
func (f *fakeGitHub) failWith(key string, status int, header map[string]string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if status == 0 {
		delete(f.fail, key)
		return
	}
	f.fail[key] = failure{status, header}
}

// putLog returns the label sets PUT so far.
func (f *fakeGitHub) putLog() [][]string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.puts)
}

func (f *fakeGitHub) requestLog() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.requests)
}

func sorted(s []string) []string {
	s = slices.Clone(s)
	if s == nil {
		s = []string{}
	}
	slices.Sort(s)
	return s
}

type label struct {
	Name string `json:"name"`
}

func labelObjects(names []string) []label {
	out := []label{}
	for _, n := range names {
		out = append(out, label{n})
	}
	return out
}

func (f *fakeGitHub) getIssue(w http.ResponseWriter, r *http.Request) {
	key := r.PathValue("owner") + "/" + r.PathValue("name") + "#" + r.PathValue("n")
	f.mu.Lock()
	labels, ok := f.issues[key]
	f.mu.Unlock()
	if !ok {
		http.Error(w, `{"message":"Not Found"}`, http.StatusNotFound)
		return
	}
	n, _ := strconv.Atoi(r.PathValue("n"))
	json.NewEncoder(w).Encode(map[string]any{"number": n, "labels": labelObjects(labels), "state": "open"})
	f.mu.Lock()
	defer f.mu.Unlock()
	f.gets++
	if f.afterGet != nil {
		f.afterGet(key, f.gets)
	}
}

func (f *fakeGitHub) getLabels(w http.ResponseWriter, r *http.Request) {
	f.mu.Lock()
	all, ok := f.labels[r.PathValue("owner")+"/"+r.PathValue("name")]
	f.mu.Unlock()
	if !ok {
		http.Error(w, `{"message":"Not Found"}`, http.StatusNotFound)
		return
	}
	per, _ := strconv.Atoi(r.URL.Query().Get("per_page"))
	page, _ := strconv.Atoi(r.URL.Query().Get("page"))
	if per <= 0 || per > 100 {
		per = 30
	}
	if page <= 0 {
		page = 1
	}
	lo, hi := min((page-1)*per, len(all)), min(page*per, len(all))
	json.NewEncoder(w).Encode(labelObjects(all[lo:hi]))
}

func (f *fakeGitHub) putLabels(w http.ResponseWriter, r *http.Request) {
	repo := r.PathValue("owner") + "/" + r.PathValue("name")
	key := repo + "#" + r.PathValue("n")
	var body struct {
		Labels []string `json:"labels"`
	}
	if err := json.NewDecoder(r.Body).Decode(&body); err != nil {
		http.Error(w, `{"message":"Problems parsing JSON"}`, http.StatusBadRequest)
		return
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if _, ok := f.issues[key]; !ok {
		http.Error(w, `{"message":"Not Found"}`, http.StatusNotFound)
		return
	}
	for _, l := range body.Labels {
		if !slices.Contains(f.labels[repo], l) {
			http.Error(w, `{"message":"Validation Failed"}`, http.StatusUnprocessableEntity)
			return
		}
	}
	f.puts = append(f.puts, sorted(body.Labels))
	f.issues[key] = sorted(body.Labels)
	json.NewEncoder(w).Encode(labelObjects(f.issues[key]))
}

// wire stands in for a proxy: the example's environment sends every
// request for a non-loopback address to it, and unless a test expects
// that, any request fails the test. (Go never proxies loopback, so the fake
// GitHub is reached directly.)
type wire struct {
	srv *httptest.Server

	mu     sync.Mutex
	hits   []string
	expect bool // the test reaches the wire on purpose
}

func tripwire(t *testing.T) *wire {
	w := &wire{}
	w.srv = httptest.NewServer(http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		w.mu.Lock()
		w.hits = append(w.hits, r.Method+" "+r.Host)
		w.mu.Unlock()
		http.Error(rw, "no connections to other addresses in tests", http.StatusBadGateway)
	}))
	t.Cleanup(func() {
		w.srv.Close()
		if hits := w.hitList(); len(hits) > 0 && !w.expect {
			t.Errorf("the example tried to reach other addresses: %v", hits)
		}
	})
	return w
}

func (w *wire) hitList() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return slices.Clone(w.hits)
}
