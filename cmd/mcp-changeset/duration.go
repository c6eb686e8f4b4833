package main

import (
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"
)

// day is the length of the "d" unit of parseDuration: 24 hours, whatever
// the calendar says.
const day = 24 * time.Hour

// parseDuration parses a length of time as people write it on a command
// line: a Go duration ("90s", "10m", "1h30m"), a whole number of days
// ("7d"), or days followed by a Go duration ("1d12h"). A day is 24 hours.
// A negative length is refused.
func parseDuration(s string) (time.Duration, error) {
	s = strings.TrimSpace(s)
	if s == "" {
		return 0, errors.New("empty duration (write e.g. 10m, 2h or 7d)")
	}
	if strings.HasPrefix(s, "-") {
		return 0, fmt.Errorf("duration %q is negative", s)
	}
	var days time.Duration
	if i := strings.IndexByte(s, 'd'); i >= 0 {
		n, err := strconv.ParseUint(strings.TrimPrefix(s[:i], "+"), 10, 64)
		if err != nil || i == 0 {
			return 0, fmt.Errorf("invalid duration %q: days are written as a whole number before d, e.g. 7d or 1d12h", s)
		}
		if n > uint64(math.MaxInt64/int64(day)) {
			return 0, fmt.Errorf("duration %q is too long", s)
		}
		days, s = time.Duration(n)*day, s[i+1:]
		if s == "" {
			return days, nil
		}
	}
	d, err := time.ParseDuration(s)
	if err != nil {
		return 0, fmt.Errorf("invalid duration %q (write e.g. 90s, 10m, 2h or 7d)", s)
	}
	if d < 0 {
		return 0, fmt.Errorf("duration %q is negative", s)
	}
	if d > math.MaxInt64-days {
		return 0, fmt.Errorf("duration %q is too long", s)
	}
	return days + d, nil
}

// durationFlag is a flag.Value holding a duration written as parseDuration
// reads it.
type durationFlag struct{ d *time.Duration }

func (f durationFlag) String() string {
	if f.d == nil {
		return ""
	}
	return formatDuration(*f.d)
}

func (f durationFlag) Set(s string) error {
	d, err := parseDuration(s)
	if err != nil {
		return err
	}
	*f.d = d
	return nil
}

// formatDuration writes d for people, to a precision that suits its size:
// "850ms", "42s", "3m12s", "5h0m0s", "12d3h".
func formatDuration(d time.Duration) string {
	switch {
	case d < time.Second:
		return d.Round(time.Millisecond).String()
	case d < 2*day:
		return d.Truncate(time.Second).String()
	}
	return fmt.Sprintf("%dd%dh", d/day, (d%day)/time.Hour)
}
