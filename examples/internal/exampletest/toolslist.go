package exampletest

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"io"
	"maps"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// ToolsList is what an example's tools/list costs an agent: the bytes of
// the JSON-RPC response as the server wrote it on stdio, and of each entry
// of its result's tools array.
type ToolsList struct {
	// Bytes is the length of the response line, without its newline.
	Bytes int
	// Tools maps each tool's name to the length of its entry.
	Tools map[string]int
	// Entries maps each tool's name to its entry, as sent.
	Entries map[string]json.RawMessage
}

// Largest returns the name and size of the largest tool entry.
func (l ToolsList) Largest() (name string, bytes int) {
	for _, n := range slices.Sorted(maps.Keys(l.Tools)) {
		if l.Tools[n] > bytes {
			name, bytes = n, l.Tools[n]
		}
	}
	return name, bytes
}

// MeasureToolsList starts the example name over stdio (see Command for
// args and env), lists its tools with a go-sdk client, and returns the
// size of the response the server wrote. It fails the test if the client
// cannot list the tools or lists other tools than the server sent.
func MeasureToolsList(t testing.TB, name string, args []string, env ...string) ToolsList {
	t.Helper()
	cmd, stderr := Command(t, name, args, env...)
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatalf("start %s: %v", name, err)
	}
	rec := &recorder{r: stdout}
	client := mcp.NewClient(&mcp.Implementation{Name: "exampletest", Version: "1"}, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cs, err := client.Connect(ctx, &mcp.IOTransport{Reader: rec, Writer: stdin}, nil)
	if err != nil {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		t.Fatalf("connect to %s: %v\nstderr:\n%s", name, err, stderr)
	}
	res, listErr := cs.ListTools(ctx, nil)
	_ = cs.Close() // closes stdin: the server exits
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		_ = cmd.Process.Kill()
		<-done
	}
	if listErr != nil {
		t.Fatalf("tools/list of %s: %v", name, listErr)
	}

	l, ok := rec.toolsList()
	if !ok {
		t.Fatalf("tools/list of %s: no response with result.tools among the lines the server wrote", name)
	}
	var listed []string
	for _, tool := range res.Tools {
		listed = append(listed, tool.Name)
	}
	slices.Sort(listed)
	sent := slices.Sorted(maps.Keys(l.Tools))
	if !slices.Equal(listed, sent) || len(res.Tools) != len(l.Tools) {
		t.Fatalf("tools/list of %s: the go-sdk client listed %v, the server sent %v", name, listed, sent)
	}
	return l
}

// recorder keeps a copy of every byte a server writes to its stdout.
type recorder struct {
	r   io.ReadCloser
	mu  sync.Mutex
	buf bytes.Buffer
}

func (r *recorder) Read(p []byte) (int, error) {
	n, err := r.r.Read(p)
	r.mu.Lock()
	r.buf.Write(p[:n])
	r.mu.Unlock()
	return n, err
}

func (r *recorder) Close() error { return r.r.Close() }

// toolsList finds the tools/list response among the recorded lines.
func (r *recorder) toolsList() (ToolsList, bool) {
	r.mu.Lock()
	data := bytes.Clone(r.buf.Bytes())
	r.mu.Unlock()
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(nil, 16<<20)
	for sc.Scan() {
		line := sc.Bytes()
		var msg struct {
			Result struct {
				Tools []json.RawMessage `json:"tools"`
			} `json:"result"`
		}
		if json.Unmarshal(line, &msg) != nil || msg.Result.Tools == nil {
			continue
		}
		l := ToolsList{Bytes: len(line), Tools: map[string]int{}, Entries: map[string]json.RawMessage{}}
		for _, entry := range msg.Result.Tools {
			var tool struct {
				Name string `json:"name"`
			}
			if json.Unmarshal(entry, &tool) != nil {
				return ToolsList{}, false
			}
			l.Tools[tool.Name] = len(entry)
			l.Entries[tool.Name] = entry
		}
		return l, true
	}
	return ToolsList{}, false
}
