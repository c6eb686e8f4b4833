package serve

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	changeset "github.com/mcp-changeset/changeset-go"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// --approval person turns on changeset.PersonApproval over stdio: the
// instructions say a named person approves every write, and undo_run's
// result can name the approval.
func TestMain_ApprovalPersonFlag(t *testing.T) {
	cmd, _, stderr := mainCmd(t, "--approval", "person", "--approvers", "2", "--dashboard-url", "https://changes.example.com")
	cmd.Stdout = nil
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "approval-test", Version: "1"}, nil).Connect(ctx, &mcp.CommandTransport{Command: cmd}, nil)
	if err != nil {
		t.Fatalf("connect: %v; stderr:\n%s", err, stderr)
	}
	defer cs.Close()
	if in := cs.InitializeResult().Instructions; !strings.Contains(in, "a named person must also approve every write") {
		t.Errorf("--approval person: the instructions say nothing of people:\n%s", in)
	}
	found := false
	for tool, err := range cs.Tools(ctx, nil) {
		if err != nil {
			t.Fatal(err)
		}
		if tool.Name == "undo_run" {
			props, _ := tool.OutputSchema.(map[string]any)["properties"].(map[string]any)
			_, found = props["approval"]
		}
	}
	if !found {
		t.Error("--approval person: undo_run's result schema has no approval")
	}
}

// The approval flags are checked together and turn into the Guard's
// options.
func TestFlags_Approval(t *testing.T) {
	secret := filepath.Join(t.TempDir(), "secret")
	if err := os.WriteFile(secret, []byte("  a secret of more than thirty-two bytes \n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		f    Flags
		want string // "" for valid
	}{
		{Flags{Approval: "person"}, ""},
		{Flags{UserApproval: true}, ""},
		{Flags{UserApproval: true, Approval: "user"}, ""},
		{Flags{UserApproval: true, Approval: "person"}, "--user-approval means --approval user"},
		{Flags{Approval: "admin"}, "want token, user or person"},
		{Flags{Approvers: 2}, "--approvers only makes sense with --approval person"},
		{Flags{Approval: "person", Approvers: 21}, "want 1 to 20"},
		{Flags{NotifyWebhook: "https://hooks.example/x"}, "go together"},
		{Flags{NotifyWebhook: "ftp://hooks.example/x", NotifySecretFile: secret}, "http:// or https://"},
		{Flags{Approval: "person", NotifyWebhook: "https://hooks.example/x", NotifySecretFile: secret}, ""},
	} {
		c.f.Ledger = "x.db"
		err := c.f.Check()
		switch {
		case c.want == "" && err != nil:
			t.Errorf("%+v: %v", c.f, err)
		case c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)):
			t.Errorf("%+v: %v, want an error containing %q", c.f, err, c.want)
		}
	}

	f := Flags{Ledger: "x.db", UserApproval: true}
	var o changeset.Options
	if err := f.Check(); err != nil || approvalOptions(f, &o, discard, "") != nil || o.Approval != changeset.UserApproval {
		t.Errorf("--user-approval: %v", o.Approval)
	}
	f = Flags{Ledger: "x.db", Approval: "person", Approvers: 2, Dashboard: "127.0.0.1:8081", NotifyWebhook: "https://hooks.example/x", NotifySecretFile: secret}
	o = changeset.Options{}
	if err := approvalOptions(f, &o, discard, ""); err != nil {
		t.Fatal(err)
	}
	if o.Approval != changeset.PersonApproval || o.Approvers != 2 || o.DashboardURL != "http://127.0.0.1:8081" ||
		o.Notify == nil || o.Notify.URL != f.NotifyWebhook || string(o.Notify.Secret) != "a secret of more than thirty-two bytes" {
		t.Errorf("options from %+v: %+v", f, o)
	}
	for dash, want := range map[string]string{"127.0.0.1:0": "", ":9000": "http://localhost:9000", "[::1]:9000": "http://[::1]:9000"} {
		if got := (&Flags{Dashboard: dash}).dashboardURL(); got != want {
			t.Errorf("the dashboard link of --dashboard %s: %q, want %q", dash, got, want)
		}
	}
	if got := (&Flags{Dashboard: "127.0.0.1:8081", DashboardURL: "https://ops.example"}).dashboardURL(); got != "https://ops.example" {
		t.Errorf("--dashboard-url is not the base: %q", got)
	}
}
