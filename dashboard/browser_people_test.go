package dashboard_test

import (
	"net/url"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"
)

// A person signs in with their own token in Chromium; the pages that say
// who is signed in and whose agent did what pass axe-core, and with the
// keyboard alone the person filters to their agents' work and undoes a
// change of it, recorded as theirs.
func TestBrowser_APersonSignsInFiltersToTheirAgentsAndUndoesByKeyboard(t *testing.T) {
	exe := needBrowser(t, true)
	src := axeSource(t)
	f := newPeopleFixture(t)
	f.build()
	anaRun, anaChange := f.agentWork("ana", "Ana's clean-up", "theme", "ana-blue")
	f.agentWork("bob", "Bob's clean-up", "language", "de")
	b := newBrowserAt(t, exe, f, func(base string) string { return base + "/login?token=" + url.QueryEscape(anaToken) })

	if got := b.text(".me"); !strings.Contains(got, "Signed in as ana") {
		t.Errorf("the header says %q, want Signed in as ana", got)
	}
	for _, p := range []struct{ name, path, ready string }{
		{"people-runs", "/", "table.list"},
		{"people-changes", "/changes", "p.mine"},
		{"people-my-agents", "/changes?by=agent%3Aana", "p.mine"},
		{"people-run", "/runs/" + anaRun, "#timeline"},
	} {
		b.step(p.name, chromedp.Navigate(b.url+p.path), chromedp.WaitVisible(chromedp.CSS(p.ready)))
		b.axe(p.name, src)
		b.shot("a11y-" + p.name + ".png")
	}

	// Keyboard only: the sign-out in the header is reachable and visibly
	// focused; then My agents' work, the change, and its undo.
	b.step("changes", chromedp.Navigate(b.url+"/changes"), chromedp.WaitVisible(chromedp.CSS("p.mine")))
	b.tabTo(`form[action="/logout"] button`)
	b.tabTo(`p.mine a.button`)
	b.step("my agents' work", chromedp.KeyEvent("\r"), b.until(`document.querySelector("p.mine") !== null && document.querySelector("p.mine").textContent.includes("Showing your agents")`))
	if got := b.listed(); len(got) != 1 || got[0] != anaChange {
		t.Fatalf("My agents' work lists %v, want only %s", got, anaChange)
	}
	b.shot("people-my-agents-keyboard.png")
	b.tabTo(`a.title[href="/changes/` + anaChange + `"]`)
	b.step("open the change", chromedp.KeyEvent("\r"), chromedp.WaitVisible(chromedp.CSS(`form[action="/changes/`+anaChange+`/undo"] button`)))
	b.tabTo(`form[action="/changes/` + anaChange + `/undo"] button`)
	b.step("undo", chromedp.KeyEvent("\r"), b.until(`document.body.textContent.includes("Change undone by person:ana.")`))
	b.axe("people-undone", src)
	if by := undoneBy(t, f, anaChange, ""); len(by) != 1 || by[0] != "person:ana" {
		t.Errorf("the history of the keyboard undo names %q, want [person:ana]", by)
	}
}
