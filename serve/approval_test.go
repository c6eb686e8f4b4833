package serve

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// --user-approval turns on changeset.UserApproval: the server's
// instructions say the user is asked, and apply_change no longer requires
// a confirmation token. Without it the token is required.
func TestMain_UserApprovalFlag(t *testing.T) {
	for _, on := range []bool{false, true} {
		var args []string
		if on {
			args = []string{"--user-approval"}
		}
		cmd, _, stderr := mainCmd(t, args...)
		cmd.Stdout = nil // the transport takes stdin and stdout
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		client := mcp.NewClient(&mcp.Implementation{Name: "approval-test", Version: "1"}, nil)
		cs, err := client.Connect(ctx, &mcp.CommandTransport{Command: cmd}, nil)
		if err != nil {
			cancel()
			t.Fatalf("--user-approval=%v: connect: %v; stderr:\n%s", on, err, stderr)
		}
		instructions := cs.InitializeResult().Instructions
		var required []string
		for tool, err := range cs.Tools(ctx, nil) {
			if err != nil {
				t.Fatal(err)
			}
			if tool.Name == "apply_change" {
				schema, _ := tool.InputSchema.(map[string]any)
				for _, r := range list(schema["required"]) {
					required = append(required, r.(string))
				}
			}
		}
		cs.Close()
		cancel()
		asksUser := strings.Contains(instructions, "asks the user itself before any change is made")
		tokenRequired := slices.Contains(required, "confirmation_token")
		if asksUser != on || tokenRequired == on {
			t.Errorf("--user-approval=%v: instructions ask the user: %v, apply_change requires a token: %v (required %v)", on, asksUser, tokenRequired, required)
		}
	}
}

// The flag is listed among the common flags of --help.
func TestMain_UserApprovalInUsage(t *testing.T) {
	cmd, stdout, _ := mainCmd(t, "--help")
	_ = cmd.Run()
	_, common, _ := strings.Cut(stdout.String(), "Common flags:")
	if !strings.Contains(common, "--user-approval") || !strings.Contains(common, "form elicitation") {
		t.Errorf("--help lists no --user-approval among the common flags:\n%s", stdout)
	}
}

func list(v any) []any { l, _ := v.([]any); return l }
