//go:build !unix

package kv_test

import "time"

// cpuTime is not measured here: the cpu-ns/op figure reads 0.
func cpuTime() time.Duration { return 0 }
