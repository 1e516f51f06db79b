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

// expect sends a request, a POST of form if it is not "", and checks
// that the answer has status and, in its body, each of says.
func expect(t *testing.T, url, form string, status int, says ...string) {
	t.Helper()
	resp, err := http.Get(url)
	if form != "" {
		resp, err = http.Post(url, "application/x-www-form-urlencoded", strings.NewReader(form))
	}
	if err != nil {
		t.Fatal(err)
	}
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil || resp.StatusCode != status {
		t.Errorf("%s: %d %s, %v; want %d", url, resp.StatusCode, body, err, status)
	}
	for _, want := range says {
		if !strings.Contains(string(body), want) {
			t.Errorf("%s: %q lacks %q", url, body, want)
		}
	}
}

// serve serves the page, read-only unless -force-release: the release
// token is in the page only then, and a release is refused without it.
func TestServe(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	held := take(t, mutexOf(newLocker(t, srv.Client(t)), "job:7"), fairlock.WithMetadata("host a"))
	for _, c := range []struct {
		flags []string
		force string
		page  []string
	}{{nil, "false", []string{`id="locks"`}}, {[]string{"-force-release"}, "true", []string{`id="locks"`, `name="fairlock-token"`}}} {
		_, url := serving(t, "redis://"+srv.Addr, c.flags...)
		expect(t, url, "", http.StatusOK, c.page...)
		expect(t, url+"locks.json", "", http.StatusOK, `"token":"`+held.Token()+`"`, `"force_release":`+c.force)
		// Without the page's token, whether force release is on or not.
		expect(t, url+"release", "kind=mutex&name=job:7&confirm=yes&token="+held.Token(), http.StatusForbidden)
	}
}

// A Redis that does not answer when serve starts is no reason to serve
// nothing: the page says it is down.
func TestServeRedisDown(t *testing.T) {
	t.Parallel()
	addr := fmt.Sprintf("127.0.0.1:%d", redistest.FreePort(t)) // nobody listens there
	said, url := serving(t, "redis://"+addr)
	if !strings.Contains(said, "cannot connect to Redis at "+addr) || !strings.Contains(said, "-cluster") {
		t.Errorf("serve on a Redis down said %q", said)
	}
	expect(t, url+"locks.json", "", http.StatusServiceUnavailable, "cannot connect to Redis at "+addr)
	expect(t, url, "", http.StatusOK, `id="banner"`)
}
