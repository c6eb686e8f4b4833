package main

import (
	"flag"
	"io"
	"strings"
	"testing"
	"time"
)

func TestParseDuration(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]time.Duration{
		"10m":     10 * time.Minute,
		"90s":     90 * time.Second,
		"1h30m":   90 * time.Minute,
		"1ms":     time.Millisecond,
		"0":       0,
		"0s":      0,
		"7d":      7 * 24 * time.Hour,
		"1d12h":   36 * time.Hour,
		"0d":      0,
		" 2d ":    48 * time.Hour,
		"1d30s":   24*time.Hour + 30*time.Second,
		"+3d":     72 * time.Hour,
		"106751d": 106751 * 24 * time.Hour,
	} {
		got, err := parseDuration(in)
		if err != nil || got != want {
			t.Errorf("parseDuration(%q) = %v, %v; want %v", in, got, err, want)
		}
	}
	for in, msg := range map[string]string{
		"":           "empty duration",
		"soon":       "invalid duration",
		"-5m":        "negative",
		"-1d":        "negative",
		"5x":         "invalid duration",
		"d":          "whole number",
		"1.5d":       "whole number",
		"7dd":        "invalid duration",
		"d5":         "whole number",
		"1d-1h":      "negative",
		"999999999d": "too long",
		"106751d24h": "too long",
	} {
		if got, err := parseDuration(in); err == nil || !strings.Contains(err.Error(), msg) {
			t.Errorf("parseDuration(%q) = %v, %v; want an error saying %q", in, got, err, msg)
		}
	}
}

func TestDurationFlag(t *testing.T) {
	t.Parallel()
	d := 10 * time.Minute
	fs := flag.NewFlagSet("x", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.Var(durationFlag{&d}, "after", "")
	if err := fs.Parse([]string{"--after", "3d"}); err != nil || d != 72*time.Hour {
		t.Fatalf("--after 3d: %v, %v", d, err)
	}
	if err := fs.Parse([]string{"--after", "later"}); err == nil || d != 72*time.Hour {
		t.Fatalf("--after later: %v, %v", d, err)
	}
	if s := (durationFlag{&d}).String(); s != "3d0h" {
		t.Errorf("String() = %q", s)
	}
	if s := (durationFlag{}).String(); s != "" {
		t.Errorf("zero String() = %q", s)
	}
}

func TestFormatDuration(t *testing.T) {
	t.Parallel()
	for d, want := range map[time.Duration]string{
		1500 * time.Microsecond:               "2ms",
		42*time.Second + 300*time.Millisecond: "42s",
		3*time.Minute + 12*time.Second:        "3m12s",
		47 * time.Hour:                        "47h0m0s",
		12*24*time.Hour + 3*time.Hour:         "12d3h",
	} {
		if got := formatDuration(d); got != want {
			t.Errorf("formatDuration(%v) = %q, want %q", d, got, want)
		}
	}
}
