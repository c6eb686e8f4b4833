package main

import (
	"fmt"
	"io"
	"os"
	"sync"
	"time"
)

// progress keeps one status line up to date on a terminal: the phase, how
// long it has run and, when known, how long it will. It prints nothing
// when its output is not a terminal, so logs and pipes stay clean.
type progress struct {
	w      io.Writer // nil: disabled
	mu     sync.Mutex
	text   string
	detail string
	from   time.Time
	want   time.Duration
	stop   chan struct{}
	done   chan struct{}
}

// newProgress returns a progress line on f if f is a terminal.
func newProgress(f *os.File) *progress {
	p := &progress{}
	if fi, err := f.Stat(); err != nil || fi.Mode()&os.ModeCharDevice == 0 {
		return p
	}
	p.w, p.stop, p.done = f, make(chan struct{}), make(chan struct{})
	go func() {
		defer close(p.done)
		t := time.NewTicker(200 * time.Millisecond)
		defer t.Stop()
		for {
			select {
			case <-p.stop:
				fmt.Fprint(p.w, "\r\033[K")
				return
			case <-t.C:
				p.draw()
			}
		}
	}()
	return p
}

// begin starts a phase expected to last want (0: unknown).
func (p *progress) begin(text string, want time.Duration) {
	p.mu.Lock()
	p.text, p.detail, p.from, p.want = text, "", time.Now(), want
	p.mu.Unlock()
}

// note adds a detail to the current phase.
func (p *progress) note(s string) {
	p.mu.Lock()
	p.detail = s
	p.mu.Unlock()
}

func (p *progress) draw() {
	p.mu.Lock()
	defer p.mu.Unlock()
	line := fmt.Sprintf("%s  %.1fs", p.text, time.Since(p.from).Seconds())
	if p.want > 0 {
		line += fmt.Sprintf(" of %.0fs", p.want.Seconds())
	}
	if p.detail != "" {
		line += "  " + p.detail
	}
	fmt.Fprint(p.w, "\r\033[K"+line)
}

// close clears the line.
func (p *progress) close() {
	if p.w != nil {
		close(p.stop)
		<-p.done
	}
}
