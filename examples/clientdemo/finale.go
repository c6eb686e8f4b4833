package main

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/cookiejar"
	"os/exec"
	"strings"
	"time"
)

// listing runs the operator's CLI on the demo's ledger and prints what it
// prints: the changes the demo made, newest first.
func (d *demo) listing(ctx context.Context) error {
	args := []string{"list", "--ledger", d.ledger}
	cmd := exec.CommandContext(ctx, d.bins.cli, args...)
	cmd.Env = environ(false)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("mcp-changeset list failed (%v): %s", err, strings.TrimSpace(stderr.String()))
	}
	rows := strings.Split(strings.TrimRight(stdout.String(), "\n"), "\n")
	// The header and the five changes: todo.txt (undone), groceries.txt
	// (refused) and the run's three notes.
	if len(rows) != 6 || !strings.HasPrefix(rows[0], "ID") || !strings.Contains(stdout.String(), d.todoID) {
		return fmt.Errorf("mcp-changeset list should print a header and the demo's 5 changes, it printed:\n%s", stdout.String())
	}
	d.note("mcp-changeset list --ledger %s", d.ledger)
	fmt.Fprint(d.out, indent(stdout.String(), "    "))
	return nil
}

// dashboard checks that the dashboard the server serves shows the demo's
// run, prints its login URL and keeps it up for d.wait, or until Enter.
func (d *demo) dashboard(ctx context.Context) error {
	login, err := d.dashboardURL(ctx)
	if err != nil {
		return err
	}
	jar, _ := cookiejar.New(nil)
	client := &http.Client{Jar: jar, Timeout: 10 * time.Second}
	resp, err := client.Get(login)
	if err != nil {
		return fmt.Errorf("the dashboard does not answer: %w", err)
	}
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 4<<20))
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || !bytes.Contains(body, []byte("Write meeting notes")) {
		return fmt.Errorf("the dashboard's login link led to %s without the demo's run %q", resp.Status, "Write meeting notes")
	}
	// The link holds the dashboard's login secret, as the server's own
	// stderr line does: it is shown to the person running the demo, and
	// stops working when the demo ends.
	switch {
	case d.wait == 0:
		d.note("dashboard: %s (it stops with the demo; --dashboard-wait D keeps it up)", login)
	case d.enter != nil:
		d.note("dashboard: %s — open it now; press Enter to stop it and end the demo", login)
		pressed := make(chan struct{})
		go func() {
			bufio.NewReader(d.enter).ReadString('\n')
			close(pressed)
		}()
		select {
		case <-ctx.Done(): // Ctrl-C ends the wait as Enter does
		case <-pressed:
		}
	default:
		d.note("dashboard: %s — serving it for %v (--dashboard-wait D to change)", login, d.wait)
		select {
		case <-ctx.Done():
		case <-time.After(d.wait):
		}
	}
	return nil
}
