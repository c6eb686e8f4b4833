package dashboard_test

import (
	"net/url"
	"testing"

	"github.com/chromedp/chromedp"
	"github.com/mcp-changeset/changeset-go/ledger"
)

// A person signs in with their own token in Chromium, opens the
// approvals, and with the keyboard alone approves one (with a note) and
// declines another; the ledger records both as theirs. The approvals
// pages pass axe-core, on a desktop and on a phone's screen.
func TestBrowser_APersonApprovesAndDeclinesByKeyboard(t *testing.T) {
	exe := needBrowser(t, true)
	src := axeSource(t)
	f := newPeopleFixture(t)
	s := f.build()
	toDecline := f.requestApproval(ledger.ApproveUndo, s.single, "", 1)
	toApprove := f.requestApproval(ledger.ApproveApply, s.pending, "", 2)
	runUndo := f.requestApproval(ledger.ApproveRunUndo, "", s.other, 1)
	b := newBrowserAt(t, exe, f, func(base string) string { return base + "/login?token=" + url.QueryEscape(anaToken) })

	for _, p := range []struct{ name, path, ready string }{
		{"approvals", "/approvals", "article.approval"},
		{"approval", "/approvals/" + toApprove, "form.decide-form"},
		{"approval-run-undo", "/approvals/" + runUndo, "form.decide-form"},
		{"change-waiting", "/changes/" + s.pending, `a.button.primary[href="/approvals/` + toApprove + `"]`},
	} {
		b.step(p.name, chromedp.Navigate(b.url+p.path), chromedp.WaitVisible(chromedp.CSS(p.ready)))
		b.axe(p.name, src)
		b.shot("a11y-" + p.name + ".png")
	}

	// Keyboard only, from the runs: the navigation's Approvals link, the
	// approval, the note and Approve.
	b.step("runs", chromedp.Navigate(b.url+"/"), chromedp.WaitVisible(chromedp.CSS("table.list")))
	b.tabTo(`nav.nav a[href="/approvals"]`)
	b.step("open the approvals", chromedp.KeyEvent("\r"), chromedp.WaitVisible(chromedp.CSS("article.approval")))
	b.tabTo(`a.button[href="/approvals/` + toApprove + `"]`)
	b.step("open the approval", chromedp.KeyEvent("\r"), chromedp.WaitVisible(chromedp.CSS("form.decide-form")))
	b.tabTo(`textarea#note`)
	b.step("type a note", chromedp.KeyEvent("checked the diff"))
	b.tabTo(`form.decide-form button.primary`)
	b.shot("approval-keyboard-focused.png")
	b.step("approve", chromedp.KeyEvent("\r"), b.until(`document.body.textContent.includes("Approved by person:ana (1 of 2)")`))
	b.axe("approval-decided", src)
	a, h := f.approval(toApprove)
	if a.Approvals != 1 || a.Status != ledger.ApprovalWaiting || h[len(h)-1].By != "person:ana" || h[len(h)-1].Note != "approve: checked the diff" {
		t.Fatalf("after the keyboard approval: %+v, last entry %+v", a, h[len(h)-1])
	}

	// On a phone's screen: decline the undo, by keyboard.
	b.step("phone", chromedp.EmulateViewport(390, 844), chromedp.Navigate(b.url+"/approvals/"+toDecline), chromedp.WaitVisible(chromedp.CSS("form.decide-form")))
	b.axe("approval-phone", src)
	b.shot("approval-phone.png")
	b.tabTo(`form.decide-form button.danger`)
	b.step("decline", chromedp.KeyEvent("\r"), b.until(`document.body.textContent.includes("Declined by person:ana.")`))
	if a, _ := f.approval(toDecline); a.Status != ledger.ApprovalDeclined || a.DecidedBy != "person:ana" {
		t.Fatalf("after the keyboard decline: %+v", a)
	}
	b.step("phone list", chromedp.Navigate(b.url+"/approvals"), chromedp.WaitVisible(chromedp.CSS("article.approval")))
	b.axe("approvals-phone", src)
	b.shot("approvals-phone.png")
}
