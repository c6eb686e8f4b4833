//go:build !unix

package testkit

import "time"

// CPUTime is not measured here: the cpu-ns/op figure reads 0.
func CPUTime() time.Duration { return 0 }
