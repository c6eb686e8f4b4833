// Package clients holds MCP client configurations for the example servers.
// Its test checks that they parse and that every flag they pass exists.
package clients

import (
	"encoding/json"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"strings"
	"testing"

	"github.com/mcp-changeset/changeset-go/examples/internal/exampletest"
)

func TestMain(m *testing.M) { exampletest.Main(m) }

// server is one entry of either file: a stdio command or an HTTP URL.
type server struct {
	Type    string            `json:"type"`
	Command string            `json:"command"`
	Args    []string          `json:"args"`
	Env     map[string]string `json:"env"`
	URL     string            `json:"url"`
}

func load(t *testing.T, file, key string) map[string]server {
	t.Helper()
	data, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	var cfg map[string]json.RawMessage
	if err := json.Unmarshal(data, &cfg); err != nil {
		t.Fatalf("%s: %v", file, err)
	}
	var servers map[string]server
	if err := json.Unmarshal(cfg[key], &servers); err != nil || len(servers) == 0 {
		t.Fatalf("%s: no %q object: %v", file, key, err)
	}
	return servers
}

// example returns the example a stdio entry runs and the flags it passes:
// "go run MODULE/examples/NAME@latest FLAGS" or "/path/to/NAME FLAGS".
func example(s server) (name string, flags []string) {
	if s.Command == "go" && len(s.Args) >= 2 && s.Args[0] == "run" {
		pkg, _, _ := strings.Cut(s.Args[1], "@")
		return path.Base(pkg), s.Args[2:]
	}
	return filepath.Base(s.Command), s.Args
}

func TestConfigs_RunExistingExamplesWithExistingFlags(t *testing.T) {
	for file, key := range map[string]string{"claude_desktop_config.json": "mcpServers", "vscode_mcp.json": "servers"} {
		for id, s := range load(t, file, key) {
			if s.Type == "http" {
				if !strings.HasPrefix(s.URL, "http://127.0.0.1:") || !strings.HasSuffix(s.URL, "/mcp") {
					t.Errorf("%s %s: url %q", file, id, s.URL)
				}
				continue
			}
			if s.Env["MCP_CHANGESET_WRITE_MODE"] != "guarded" {
				t.Errorf("%s %s: writes are not enabled", file, id)
			}
			name, flags := example(s)
			if _, err := os.Stat(filepath.Join("..", name)); err != nil {
				t.Logf("%s %s: example %s is not in this tree yet; its flags are not checked", file, id, name)
				continue
			}
			// The flag package stops at --help: every flag before it must exist.
			out, err := exec.Command(exampletest.Build(t, name), append(flags, "--help")...).CombinedOutput()
			if err != nil {
				t.Errorf("%s %s: %s %v --help: %v\n%s", file, id, name, flags, err, out)
			}
		}
	}
}
