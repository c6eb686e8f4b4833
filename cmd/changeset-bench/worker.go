package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
	"strings"
	"time"

	changeset "github.com/mcp-changeset/changeset-go"
	"github.com/mcp-changeset/changeset-go/ledger"
)

// workerCommand is the hidden subcommand that runs one of the processes
// sharing a ledger. The parent starts the binary itself with it.
const workerCommand = "__worker"

// Worker modes.
const (
	modeCycles = "cycles" // full cycles of opOrdinary on the worker's own key
	modeRace   = "race"   // apply every change of a shared list, in a random order
)

// workerResult is what a worker reports on its standard output, as JSON.
type workerResult struct {
	Cycles  int `json:"cycles"`  // full cycles completed (cycles mode)
	Applied int `json:"applied"` // applies this worker won
	// Refusals of a claim, by cause: another process claimed the change
	// at the same moment (Conflicts), or first (StatusRefusals: "cannot
	// be applied (status: applying)" and the like); the ledger stayed
	// locked past the busy timeout (Busy); anything else (Other).
	Conflicts      int      `json:"conflicts"`
	StatusRefusals int      `json:"status_refusals"`
	Busy           int      `json:"busy"`
	Other          int      `json:"other"`
	OtherSamples   []string `json:"other_samples,omitempty"`
	// ClaimMicros holds the latency of every claim, in microseconds: from
	// the Apply call to the moment the operation's Apply ran (a won claim)
	// or Apply returned (a refused one).
	ClaimMicros []int64       `json:"claim_us"`
	Won         []string      `json:"won,omitempty"` // IDs of the changes this worker applied (race mode)
	Elapsed     time.Duration `json:"elapsed_ns"`
	CPU         time.Duration `json:"cpu_ns"`
}

// classify counts a failed Apply or cycle.
func (r *workerResult) classify(err error) {
	msg := err.Error()
	switch {
	case errors.Is(err, ledger.ErrBusy):
		r.Busy++
	case strings.Contains(msg, "claimed by another request"):
		r.Conflicts++
	case strings.Contains(msg, "cannot be applied (status: "):
		r.StatusRefusals++
	default:
		r.Other++
		if len(r.OtherSamples) < 5 {
			r.OtherSamples = append(r.OtherSamples, msg)
		}
	}
}

// workerMain runs a worker: it opens the ledger, prints "ready", and then
// for each "go DURATION" line on its standard input does its work and
// prints its result as a line of JSON, until its input ends.
func workerMain(args []string) int {
	fs := flag.NewFlagSet(workerCommand, flag.ContinueOnError)
	target := fs.String("ledger", "", "ledger path or URL")
	mode := fs.String("mode", modeCycles, "cycles or race")
	changes := fs.String("changes", "", "file of 'id token' lines to race for")
	marker := fs.String("marker", "", "file to append a line to at every apply")
	id := fs.Int("id", 0, "the worker's number")
	fs.Var(&durability, "durability", "full or claims")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if err := work(*target, *mode, *changes, *marker, *id); err != nil {
		fmt.Fprintln(os.Stderr, "worker:", err)
		return 1
	}
	return 0
}

// work opens the ledger and runs the parent's commands.
func work(target, mode, changesFile, markerFile string, id int) error {
	f, err := os.OpenFile(markerFile, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o600)
	if err != nil {
		return err
	}
	defer f.Close()
	s := newStore(f)
	g, err := changeset.New(nil, changeset.Options{LedgerPath: target, WriteMode: changeset.WriteGuarded, Durability: durability})
	if err != nil {
		return err
	}
	defer g.Close()
	if err := register(g, s, false); err != nil {
		return err
	}
	var pairs [][2]string
	if mode == modeRace {
		if pairs, err = readPairs(changesFile); err != nil {
			return err
		}
		rand.Shuffle(len(pairs), func(i, j int) { pairs[i], pairs[j] = pairs[j], pairs[i] })
	}
	// The parent writes "go DURATION" once every worker is ready, so that
	// they start together, and again for each slice of a measurement.
	fmt.Println("ready")
	in := bufio.NewScanner(os.Stdin)
	enc := json.NewEncoder(os.Stdout)
	for in.Scan() {
		d, err := time.ParseDuration(strings.TrimPrefix(in.Text(), "go "))
		if err != nil {
			return fmt.Errorf("unknown command %q", in.Text())
		}
		var res *workerResult
		if mode == modeRace {
			res = race(g, s, pairs)
		} else {
			res = cycles(g, s, d, id)
		}
		if err := enc.Encode(res); err != nil {
			return err
		}
	}
	return in.Err()
}

// cycles runs full cycles of opOrdinary on the worker's own key for d.
func cycles(g *changeset.Guard, s *store, d time.Duration, id int) *workerResult {
	ctx := context.Background()
	res := &workerResult{}
	key := fmt.Sprintf("w%d", id)
	cpu0, start := cpuTime(), time.Now()
	for time.Since(start) < d {
		s.seq++
		claim, err := cycle(ctx, g, s, opOrdinary, key, fmt.Sprintf("w%d-%d", id, s.seq))
		if err != nil {
			res.classify(err)
			continue
		}
		res.Cycles++
		res.ClaimMicros = append(res.ClaimMicros, claim.Microseconds())
	}
	res.Elapsed, res.CPU = time.Since(start), cpuTime()-cpu0
	return res
}

// race applies every change of pairs, in the worker's own random order.
func race(g *changeset.Guard, s *store, pairs [][2]string) *workerResult {
	ctx := context.Background()
	res := &workerResult{}
	cpu0, start := cpuTime(), time.Now()
	for _, p := range pairs {
		s.callStart, s.claimed = time.Now(), 0
		if _, err := g.Apply(ctx, p[0], p[1]); err != nil {
			res.classify(err)
			res.ClaimMicros = append(res.ClaimMicros, time.Since(s.callStart).Microseconds())
			continue
		}
		res.Applied++
		res.Won = append(res.Won, p[0])
		res.ClaimMicros = append(res.ClaimMicros, s.claimed.Microseconds())
	}
	res.Elapsed, res.CPU = time.Since(start), cpuTime()-cpu0
	return res
}

// readPairs reads the "id token" lines the parent wrote.
func readPairs(path string) ([][2]string, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var out [][2]string
	for _, line := range strings.Split(strings.TrimSpace(string(data)), "\n") {
		id, token, ok := strings.Cut(line, " ")
		if !ok {
			return nil, fmt.Errorf("%s: malformed line %q", path, line)
		}
		out = append(out, [2]string{id, token})
	}
	return out, nil
}
