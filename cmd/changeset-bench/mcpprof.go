package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"os"
	"path/filepath"
	"runtime/pprof"
	"sync"
	"time"

	changeset "github.com/mcp-changeset/changeset-go"
	"github.com/mcp-changeset/changeset-go/serve"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// profileResult is the in-process run that --mcp-profile profiled.
type profileResult struct {
	Path         string             `json:"path"`
	Cycles       int                `json:"cycles"`
	Elapsed      time.Duration      `json:"elapsed_ns"`
	CyclesPerSec float64            `json:"cycles_per_s"`
	Calls        map[string]latency `json:"calls"`
}

// profileMCP runs the settings example's server in this process, set up
// as serve.Main sets it up for stdio (the same Guard options, an Info
// logger, writes enabled through the environment), drives it with one
// go-sdk client over in-memory transports running cycles for d, and writes
// a CPU profile of that to path. The server's goroutines carry the label side=server and
// the client's side=client, so that
//
//	go tool pprof -tagfocus side=server -top -cum FILE
//
// shows the server alone.
func profileMCP(ctx context.Context, path, work string, d time.Duration, prog *progress) (*profileResult, error) {
	prog.begin("mcp: profiling an in-process settings server", d)
	os.Setenv(changeset.DefaultWriteModeEnv, changeset.WriteGuarded)
	defer os.Unsetenv(changeset.DefaultWriteModeEnv)
	server := mcp.NewServer(&mcp.Implementation{Name: "settings", Version: "1.0.0"}, nil)
	log := slog.New(slog.NewTextHandler(io.Discard, &slog.HandlerOptions{Level: slog.LevelInfo}))
	g, err := changeset.New(server, changeset.Options{LedgerPath: filepath.Join(work, "profile.db"), Logger: log,
		ScopeFunc: serve.ScopeFromRequest, Principal: serve.PrincipalFromRequest, Durability: durability})
	if err != nil {
		return nil, err
	}
	defer g.Close()
	registerSettings(server, g)

	st, ct := mcp.NewInMemoryTransports()
	var ss *mcp.ServerSession
	pprof.Do(ctx, pprof.Labels("side", "server"), func(ctx context.Context) { ss, err = server.Connect(ctx, st, nil) })
	if err != nil {
		return nil, err
	}
	defer ss.Close()
	s := &mcpServer{ex: mcpExamples["settings"], log: &logTail{}, lat: map[string][]int64{}}
	f, err := os.Create(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	res := &profileResult{Path: path}
	pprof.Do(ctx, pprof.Labels("side", "client"), func(ctx context.Context) {
		if err = s.connect(ctx, ct); err != nil {
			return
		}
		defer s.session.Close()
		if err = pprof.StartCPUProfile(f); err != nil {
			return
		}
		start := time.Now()
		for time.Since(start) < d && err == nil {
			if err = s.cycle(ctx); err == nil {
				res.Cycles++
			}
		}
		res.Elapsed = time.Since(start)
		pprof.StopCPUProfile()
		for i := 0; i < 200 && err == nil; i++ { // the read call's latency, for comparison
			_, err = s.call(ctx, "read", s.ex.read, nil)
		}
	})
	if err != nil {
		return nil, err
	}
	res.CyclesPerSec = float64(res.Cycles) / res.Elapsed.Seconds()
	res.Calls = map[string]latency{}
	for kind, l := range s.lat {
		res.Calls[kind] = latency{N: len(l), P50: percentile(l, 50), P99: percentile(l, 99)}
	}
	return res, f.Close()
}

// registerSettings registers what examples/settings registers: the
// guarded set_setting on two in-memory settings, and get_settings.
func registerSettings(server *mcp.Server, g *changeset.Guard) {
	type setting struct {
		Key   string `json:"key" jsonschema:"the setting to change: theme or language"`
		Value string `json:"value" jsonschema:"the new value"`
	}
	type applied struct {
		Previous string `json:"previous"`
	}
	type settingsOutput struct {
		Settings map[string]string `json:"settings"`
	}
	var mu sync.Mutex
	settings := map[string]string{"theme": "light", "language": "en"}
	get := func(k string) (string, bool) { mu.Lock(); defer mu.Unlock(); v, ok := settings[k]; return v, ok }
	set := func(k, v string) string {
		mu.Lock()
		defer mu.Unlock()
		old := settings[k]
		settings[k] = v
		return old
	}
	op := changeset.Operation[setting, setting, applied]{
		Preview: func(ctx context.Context, in setting) (*changeset.Proposal[setting], error) {
			current, ok := get(in.Key)
			if !ok {
				return nil, changeset.Refuse("unknown setting %q (known: theme, language)", in.Key)
			}
			return &changeset.Proposal[setting]{
				Payload: in,
				Diff:    changeset.DiffFields(map[string]any{in.Key: current}, map[string]any{in.Key: in.Value}),
				Summary: fmt.Sprintf("Set %s to %q", in.Key, in.Value),
			}, nil
		},
		Apply: func(ctx context.Context, p setting) (applied, error) {
			return applied{Previous: set(p.Key, p.Value)}, nil
		},
		Undo: func(ctx context.Context, p setting, r applied) error {
			set(p.Key, r.Previous)
			return nil
		},
		Observe: func(ctx context.Context, p setting) (any, error) {
			v, _ := get(p.Key)
			return v, nil
		},
	}
	changeset.Register(g, &mcp.Tool{Name: "set_setting", Description: "Change a setting."}, op)
	mcp.AddTool(server, &mcp.Tool{
		Name:        "get_settings",
		Description: "Read every setting.",
		Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true},
	}, func(ctx context.Context, req *mcp.CallToolRequest, _ struct{}) (*mcp.CallToolResult, settingsOutput, error) {
		mu.Lock()
		defer mu.Unlock()
		return nil, settingsOutput{Settings: maps.Clone(settings)}, nil
	})
}
