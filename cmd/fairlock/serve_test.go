package main

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net/http"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/fairlock/fairlock/fairlock"
	"github.com/fairlock/fairlock/internal/redistest"
)

// serving runs fairlock -redis URL serve with flags until the test ends,
// and returns the lines it printed before its address and the address
// itself.
func serving(t *testing.T, redisURL string, flags ...string) (said, url string) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	out, in := io.Pipe()
	exited := make(chan int, 1)
	var stderr strings.Builder
	go func() {
		defer in.Close()
		exited <- run(ctx, append([]string{"-redis", redisURL, "serve", "-addr", "127.0.0.1:0"}, flags...), strings.NewReader(""), in, &stderr)
	}()
	t.Cleanup(func() {
		cancel()
		if code := <-exited; code != exitOK {
			t.Errorf("serve, interrupted: exit %d: %s", code, stderr.String())
		}
	})
	lines := bufio.NewScanner(out)
	address := regexp.MustCompile(`on (http://\S+/) `)
	for lines.Scan() {
		if m := address.FindStringSubmatch(lines.Text()); m != nil {
			go io.Copy(io.Discard, out) //nolint:errcheck // the rest of stdout, if any
			return said, m[1]
		}
		said += lines.Text() + "\n"
	}
	t.Fatalf("serve printed no address: %q", said)
	return "", ""
}

// fetch GETs url; its status and body.
func fetch(t *testing.T, url string) (int, string) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, string(body)
}

// serve serves the page, read-only unless -force-release: the release
// token is in the page only then, and a release is refused without it.
func TestServe(t *testing.T) {
	srv := redistest.Start(t)
	held := take(t, mutexOf(newLocker(t, srv.Client(t)), "job:7"), fairlock.WithMetadata("host a"))
	for _, c := range []struct {
		flags []string
		token bool
	}{{nil, false}, {[]string{"-force-release"}, true}} {
		_, url := serving(t, "redis://"+srv.Addr, c.flags...)
		status, page := fetch(t, url)
		if status != http.StatusOK || strings.Contains(page, "fairlock-token") != c.token {
			t.Errorf("serve %q: the page: %d %s", c.flags, status, page)
		}
		status, locks := fetch(t, url+"locks.json")
		if status != http.StatusOK || !strings.Contains(locks, `"token":"`+held.Token()+`"`) ||
			!strings.Contains(locks, `"force_release":`+map[bool]string{false: "false", true: "true"}[c.token]) {
			t.Errorf("serve %q: locks.json: %d %s", c.flags, status, locks)
		}
		resp, err := http.Post(url+"release", "application/x-www-form-urlencoded",
			strings.NewReader("kind=mutex&name=job:7&confirm=yes&token="+held.Token()))
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusForbidden {
			t.Errorf("serve %q: a release without the page's token: %d", c.flags, resp.StatusCode)
		}
	}
}

// A Redis that does not answer when serve starts is no reason to serve
// nothing: the page says it is down.
func TestServeRedisDown(t *testing.T) {
	addr := fmt.Sprintf("127.0.0.1:%d", redistest.FreePort(t)) // nobody listens there
	said, url := serving(t, "redis://"+addr)
	if !strings.Contains(said, "cannot connect to Redis at "+addr) || !strings.Contains(said, "-cluster") {
		t.Errorf("serve on a Redis down said %q", said)
	}
	start := time.Now()
	status, locks := fetch(t, url+"locks.json")
	t.Logf("locks.json, Redis down: %d in %v: %s", status, time.Since(start).Round(time.Millisecond), locks)
	if status != http.StatusServiceUnavailable || !strings.Contains(locks, "cannot connect to Redis at "+addr) {
		t.Errorf("locks.json, Redis down: %d %s", status, locks)
	}
	if status, page := fetch(t, url); status != http.StatusOK || !strings.Contains(page, `id="banner"`) {
		t.Errorf("the page, Redis down: %d %s", status, page)
	}
}
