package redistest

import (
	"context"
	"os"
	"strings"
	"testing"

	"github.com/redis/go-redis/v9"
)

// DocACLRule returns the line of the document at path (docs/operations.md) that
// starts with "ACL SETUSER user ", so that tests run exactly the rule the
// document gives.
func DocACLRule(t testing.TB, path, user string) string {
	t.Helper()
	doc, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	for line := range strings.Lines(string(doc)) {
		if line = strings.TrimSpace(line); strings.HasPrefix(line, "ACL SETUSER "+user+" ") {
			return line
		}
	}
	t.Fatalf("%s has no line starting with ACL SETUSER %s", path, user)
	return ""
}

// SetUser runs an ACL SETUSER line (words separated by spaces, none
// quoted) on the server as its default user.
func (s *Server) SetUser(t testing.TB, rule string) {
	t.Helper()
	c := redis.NewClient(&redis.Options{Addr: s.Addr})
	defer c.Close()
	var args []any
	for _, w := range strings.Fields(rule) {
		args = append(args, w)
	}
	if err := c.Do(context.Background(), args...).Err(); err != nil {
		t.Fatalf("%s: %v", rule, err)
	}
}

// ClientAs returns a client that logs in as user, closed when the test
// ends.
func (s *Server) ClientAs(t testing.TB, user, password string) *redis.Client {
	c := redis.NewClient(&redis.Options{Addr: s.Addr, Username: user, Password: password})
	t.Cleanup(func() { c.Close() })
	return c
}
