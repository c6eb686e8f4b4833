package main

import (
	"net/http"
	"testing"
	"time"
)

func TestRetryAfter(t *testing.T) {
	now := time.Unix(1_800_000_000, 0)
	for _, tc := range []struct {
		header http.Header
		want   string
	}{
		{http.Header{"Retry-After": {"30"}}, "30 seconds"},
		{http.Header{"X-Ratelimit-Reset": {"1800000090"}}, "90 seconds (at 2027-01-15T08:01:30Z)"},
		{http.Header{"X-Ratelimit-Reset": {"1799999000"}}, "1 second (at 2027-01-15T07:43:20Z)"},
		{http.Header{}, "a minute"},
	} {
		if got := retryAfter(tc.header, now); got != tc.want {
			t.Errorf("retryAfter(%v) = %q, want %q", tc.header, got, tc.want)
		}
	}
}

func TestCheckAPIURL(t *testing.T) {
	for _, ok := range []string{"https://api.github.com", "https://github.example.com/api/v3/", "http://127.0.0.1:8080", "http://[::1]:1", "http://localhost:9"} {
		if _, err := checkAPIURL(ok); err != nil {
			t.Errorf("checkAPIURL(%q) = %v", ok, err)
		}
	}
	for _, bad := range []string{"", "api.github.com", "http://api.github.com", "https://user:pw@api.github.com", "https://api.github.com/?x=1", "file:///etc"} {
		if _, err := checkAPIURL(bad); err == nil {
			t.Errorf("checkAPIURL(%q) accepted", bad)
		}
	}
}
