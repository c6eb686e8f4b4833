package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	changeset "github.com/mcp-changeset/changeset-go"
)

// Limits on what the client asks for and reads.
const (
	requestTimeout = 10 * time.Second
	perPage        = 100
	maxLabelPages  = 20      // 2,000 labels
	maxBodyBytes   = 4 << 20 // of one response
)

// github is a small client for the three GitHub REST calls the example
// needs. Its errors are *changeset.ChangeError with messages for the agent;
// they never hold the token, and details go to the log.
type github struct {
	base  *url.URL // e.g. https://api.github.com, no trailing slash
	token string
	http  *http.Client
	log   *slog.Logger
}

func newGitHub(base *url.URL, token string, log *slog.Logger) *github {
	return &github{base: base, token: token, log: log, http: &http.Client{
		Timeout: requestTimeout,
		// A redirect could carry the request to another host; GitHub
		// redirects only for renamed or moved repositories.
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}}
}

// checkAPIURL accepts https URLs, and plain http only on loopback (a test's
// fake GitHub): the token must not cross a network unencrypted.
func checkAPIURL(raw string) (*url.URL, error) {
	u, err := url.Parse(strings.TrimSuffix(raw, "/"))
	if err != nil || u.Host == "" || u.RawQuery != "" || u.Fragment != "" || u.User != nil {
		return nil, fmt.Errorf("--api-url %q is not a base URL such as https://api.github.com", raw)
	}
	switch u.Scheme {
	case "https":
		return u, nil
	case "http":
		host := u.Hostname()
		if ip, err := netip.ParseAddr(host); (err == nil && ip.IsLoopback()) || host == "localhost" {
			return u, nil
		}
		return nil, fmt.Errorf("--api-url %s: plain http is allowed only on loopback, since the token travels with every request", raw)
	}
	return nil, fmt.Errorf("--api-url %q: the scheme must be https", raw)
}

// issue is the part of a GitHub issue the example reads.
type issue struct {
	Number int `json:"number"`
	Labels []struct {
		Name string `json:"name"`
	} `json:"labels"`
}

// issueLabels returns the sorted label names of an issue.
func (g *github) issueLabels(ctx context.Context, r repo, number int) ([]string, error) {
	var is issue
	if err := g.do(ctx, http.MethodGet, r.path("issues", strconv.Itoa(number)), nil, nil, &is,
		fmt.Sprintf("issue %s#%d", r, number)); err != nil {
		return nil, err
	}
	names := []string{}
	for _, l := range is.Labels {
		names = append(names, l.Name)
	}
	slices.Sort(names)
	return names, nil
}

// repoLabels returns the names of every label of a repository, paging
// through them.
func (g *github) repoLabels(ctx context.Context, r repo) ([]string, error) {
	names := []string{}
	for page := 1; ; page++ {
		if page > maxLabelPages {
			return nil, changeset.Refuse("repository %s has more than %d labels; this server does not read that many", r, maxLabelPages*perPage)
		}
		var labels []struct {
			Name string `json:"name"`
		}
		q := url.Values{"per_page": {strconv.Itoa(perPage)}, "page": {strconv.Itoa(page)}}
		if err := g.do(ctx, http.MethodGet, r.path("labels"), q, nil, &labels, "repository "+r.String()); err != nil {
			return nil, err
		}
		for _, l := range labels {
			names = append(names, l.Name)
		}
		if len(labels) < perPage {
			return names, nil
		}
	}
}

// setLabels replaces an issue's labels with names.
func (g *github) setLabels(ctx context.Context, r repo, number int, names []string) error {
	body := struct {
		Labels []string `json:"labels"`
	}{names}
	return g.do(ctx, http.MethodPut, r.path("issues", strconv.Itoa(number), "labels"), nil, body, nil,
		fmt.Sprintf("issue %s#%d", r, number))
}

// do sends one request and decodes a 2xx answer into out. what names the
// thing asked for, for error messages.
func (g *github) do(ctx context.Context, method, path string, query url.Values, body, out any, what string) error {
	u := *g.base
	u.Path = strings.TrimSuffix(u.Path, "/") + path
	u.RawQuery = query.Encode()
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return err
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, u.String(), rd)
	if err != nil {
		return err
	}
	req.Header.Set("Accept", "application/vnd.github+json")
	req.Header.Set("X-GitHub-Api-Version", "2022-11-28")
	req.Header.Set("User-Agent", "changeset-go-example-githublabels")
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if g.token != "" {
		req.Header.Set("Authorization", "Bearer "+g.token)
	}
	write := method != http.MethodGet
	resp, err := g.http.Do(req)
	if err != nil {
		// url.Error names the URL, never the headers: the token is safe in
		// the log.
		g.log.Warn("GitHub request failed", "method", method, "path", path, "err", err)
		return unreachable(err, write)
	}
	defer resp.Body.Close()
	if resp.StatusCode/100 != 2 {
		io.Copy(io.Discard, io.LimitReader(resp.Body, maxBodyBytes))
		g.log.Warn("GitHub answered with an error", "method", method, "path", path, "status", resp.StatusCode)
		return statusError(resp, what, write)
	}
	if out == nil {
		io.Copy(io.Discard, io.LimitReader(resp.Body, maxBodyBytes))
		return nil
	}
	if err := json.NewDecoder(io.LimitReader(resp.Body, maxBodyBytes)).Decode(out); err != nil {
		g.log.Warn("GitHub's answer could not be decoded", "method", method, "path", path, "err", err)
		return changeset.Refuse("GitHub's answer about %s could not be read", what)
	}
	return nil
}

// unreachable describes a request that got no answer.
func unreachable(err error, write bool) error {
	reason := "the connection failed"
	var ne net.Error
	if errors.Is(err, context.DeadlineExceeded) || (errors.As(err, &ne) && ne.Timeout()) {
		reason = fmt.Sprintf("no answer within %v", requestTimeout)
	}
	if write {
		return changeset.Refuse("GitHub could not be reached (%s); the labels may or may not have changed: check the issue", reason)
	}
	return changeset.Refuse("GitHub could not be reached (%s); nothing was changed", reason)
}

// statusError turns an error answer into a message for the agent.
func statusError(resp *http.Response, what string, write bool) error {
	code := resp.StatusCode
	switch {
	case code == http.StatusTooManyRequests,
		code == http.StatusForbidden && (resp.Header.Get("X-RateLimit-Remaining") == "0" || resp.Header.Get("Retry-After") != ""):
		return changeset.Refuse("GitHub: rate limited; retry after %s; nothing was changed", retryAfter(resp.Header, time.Now()))
	case code == http.StatusNotFound:
		return changeset.Refuse("%s not found on GitHub (or the server's token cannot see it); nothing was changed", what)
	case code == http.StatusUnauthorized:
		return changeset.Refuse("GitHub refused the server's credentials (401); an operator must check GITHUB_TOKEN; nothing was changed")
	case code == http.StatusForbidden:
		return changeset.Refuse("GitHub denied access to %s (403); the server's token may lack permission; nothing was changed", what)
	case code == http.StatusGone:
		return changeset.Refuse("%s is gone from GitHub (410); nothing was changed", what)
	case code == http.StatusUnprocessableEntity:
		return changeset.Refuse("GitHub rejected the request about %s as invalid (422); nothing was changed", what)
	case code/100 == 3:
		return changeset.Refuse("GitHub redirected the request about %s (%d): the repository may have been renamed or moved; nothing was changed", what, code)
	case code/100 == 5 && write:
		return changeset.Refuse("GitHub failed with %d %s; the labels may or may not have changed: check the issue", code, http.StatusText(code))
	case code/100 == 5:
		return changeset.Refuse("GitHub failed with %d %s; nothing was changed; try again later", code, http.StatusText(code))
	}
	return changeset.Refuse("GitHub answered %d %s about %s; nothing was changed", code, http.StatusText(code), what)
}

// retryAfter reads when a rate limit ends: Retry-After (seconds), else
// X-RateLimit-Reset (Unix time).
func retryAfter(h http.Header, now time.Time) string {
	if s, err := strconv.Atoi(h.Get("Retry-After")); err == nil && s >= 0 {
		return seconds(s)
	}
	if reset, err := strconv.ParseInt(h.Get("X-RateLimit-Reset"), 10, 64); err == nil {
		wait := time.Unix(reset, 0).Sub(now).Round(time.Second)
		if wait < time.Second {
			wait = time.Second
		}
		return fmt.Sprintf("%s (at %s)", seconds(int(wait.Seconds())), time.Unix(reset, 0).UTC().Format(time.RFC3339))
	}
	return "a minute"
}

func seconds(n int) string {
	if n == 1 {
		return "1 second"
	}
	return strconv.Itoa(n) + " seconds"
}
