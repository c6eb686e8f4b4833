//go:build !linux

package main

import (
	"runtime"
	"time"
)

// cpuTime is unknown on this system; CPU figures are then left out.
func cpuTime() time.Duration { return 0 }

func fsType(dir string) string { return "unknown" }

func cpuModel() string { return "unknown" }

func kernel() string { return runtime.GOOS }

// memDir returns "": no tmpfs is assumed outside Linux.
func memDir() string { return "" }

func loadAverage() string { return "unknown" }

// procCPU is unknown on this system: the server CPU figures are left out.
func procCPU(pid int) (time.Duration, bool) { return 0, false }
