package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mcp-changeset/changeset-go/examples/internal/exampletest"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// One identity making 1,500 previews of about 60 KB each cannot make one
// answer of over 16 MB, nor push the server past 1 GiB of memory: the
// pending quota (1,000 by default) refuses the rest, and get_run pages.
func TestBounds_ManyLargePreviewsFromOneIdentity(t *testing.T) {
	if testing.Short() {
		t.Skip("slow: 1,500 previews")
	}
	cmd, stderr := exampletest.Command(t, "settings", nil, exampletest.Guarded)
	client := mcp.NewClient(&mcp.Implementation{Name: "bounds", Version: "1"}, nil)
	ctx := context.Background()
	cs, err := client.Connect(ctx, &mcp.CommandTransport{Command: cmd}, nil)
	if err != nil {
		t.Fatalf("connect: %v\n%s", err, stderr)
	}
	defer cs.Close()
	call := func(name string, args map[string]any) (*mcp.CallToolResult, int) {
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: name, Arguments: args})
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		raw, _ := json.Marshal(res)
		return res, len(raw)
	}

	const previews, size = 1500, 20 << 10 // the value appears in the payload, the diff and the summary: ~60 KB
	value := strings.Repeat("v", size)
	var accepted, refused atomic.Int64
	var runID atomic.Value
	start := time.Now()
	// Four callers at once, as an agent with parallel tool calls would.
	var wg sync.WaitGroup
	next := atomic.Int64{}
	for range 4 {
		wg.Go(func() {
			for i := next.Add(1) - 1; i < previews; i = next.Add(1) - 1 {
				res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "preview_set_setting", Arguments: map[string]any{"key": "theme", "value": value + strconv.Itoa(int(i))}})
				if err != nil {
					t.Errorf("preview %d: %v", i, err)
					return
				}
				if res.IsError {
					if text := res.Content[0].(*mcp.TextContent).Text; !strings.Contains(text, "the limit of this server") {
						t.Errorf("preview %d refused for another reason: %s", i, text)
						return
					}
					refused.Add(1)
					continue
				}
				accepted.Add(1)
				runID.Store(res.StructuredContent.(map[string]any)["run_id"].(string))
			}
		})
	}
	wg.Wait()
	if t.Failed() {
		t.FailNow()
	}
	t.Logf("%d previews of ~60 KB in %v: %d accepted, %d refused by the quota", previews, time.Since(start), accepted.Load(), refused.Load())
	if accepted.Load() != 1000 || refused.Load() != 500 {
		t.Fatalf("accepted %d, refused %d; want 1000 and 500", accepted.Load(), refused.Load())
	}

	// The session run holds the 1,000 previews; get_run pages through them.
	seen, pages, largest := 0, 0, 0
	cursor := ""
	for {
		args := map[string]any{"run_id": runID.Load(), "limit": 500}
		if cursor != "" {
			args["cursor"] = cursor
		}
		res, n := call("get_run", args)
		if res.IsError {
			t.Fatalf("get_run: %v", res.Content[0].(*mcp.TextContent).Text)
		}
		pages++
		largest = max(largest, n)
		out := res.StructuredContent.(map[string]any)
		seen += len(out["changes"].([]any))
		next, _ := out["next_cursor"].(string)
		if next == "" {
			break
		}
		cursor = next
	}
	t.Logf("get_run: %d changes in %d pages, the largest answer %d bytes", seen, pages, largest)
	if seen != 1000 || largest > 16<<20 {
		t.Fatalf("get_run saw %d changes, largest answer %d bytes; want 1000 and at most 16 MB", seen, largest)
	}
	if pages < 2 {
		t.Fatalf("get_run answered in %d page", pages)
	}

	peak := peakRSS(t, cmd.Process.Pid)
	t.Logf("server peak RSS: %d MiB", peak>>20)
	if peak > 1<<30 {
		t.Fatalf("server peak RSS %d bytes, over 1 GiB", peak)
	}
}

// peakRSS reads a process's peak resident set size (VmHWM) from /proc.
func peakRSS(t *testing.T, pid int) int64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Skipf("no /proc here: %v", err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if rest, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(rest), "kB")), 10, 64)
			if err != nil {
				t.Fatal(err)
			}
			return kb << 10
		}
	}
	t.Fatal("no VmHWM in /proc status")
	return 0
}
