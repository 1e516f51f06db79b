package fairlock

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"sync"

	"github.com/redis/go-redis/v9"
)

// A preflight checks, before a Locker's first write, that Redis can keep
// its promises: a version with the commands the scripts use (7.0), and no
// eviction of keys. It runs once per Locker (on every primary of a
// Cluster), until it gets an answer; after that it costs a load of a flag.
type preflight struct {
	mu   sync.Mutex
	done bool
	err  error // what every acquire returns, once checked
}

// ensure returns the result of the check, running it if needed.
func (p *preflight) ensure(ctx context.Context, client redis.UniversalClient, cfg *config) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.done {
		return p.err
	}
	err := inspectServers(ctx, client)
	var unknown *unknownServer
	switch {
	case err == nil:
	case errors.As(err, &unknown):
		if !unknown.miniredis {
			warn(cfg, unknown)
		}
		err = nil
	case errors.Is(err, ErrUnsafeEviction) && cfg.unsafeEviction:
		warn(cfg, err)
		err = nil
	case errors.Is(err, ErrUnsafeEviction), errors.Is(err, errTooOld):
		// Refused: every acquire returns it.
	case !isRedisError(err):
		return err // no answer: ask again next time
	default:
		warn(cfg, &unknownServer{err: err})
		err = nil
	}
	p.done, p.err = true, err
	return err
}

var errTooOld = errors.New("fairlock: Redis is too old")

// unknownServer is a server whose settings cannot be read: INFO refused
// (a managed Redis, an ACL rule), or not a Redis that reports them.
type unknownServer struct {
	err       error
	miniredis bool
}

func (u *unknownServer) Error() string {
	return "fairlock: cannot read Redis's version and eviction policy (" + u.err.Error() + "); going on unchecked: fairlock needs Redis " + MinRedisVersion + " or later and maxmemory-policy noeviction"
}

// warn reports a risk the Locker goes on with, once: as an Event, and in
// the log (slog's default logger when WithLogger gave none).
func warn(cfg *config, err error) {
	cfg.observe(Event{Kind: EventWarning, Err: err})
	if cfg.logger == nil {
		slog.Warn("fairlock: going on despite a risk", "err", err)
	}
}

// inspectServers checks every primary.
func inspectServers(ctx context.Context, client redis.UniversalClient) error {
	switch c := client.(type) {
	case *redis.ClusterClient:
		var mu sync.Mutex
		var first error
		err := c.ForEachMaster(ctx, func(ctx context.Context, node *redis.Client) error {
			if err := inspectServer(ctx, node); err != nil {
				mu.Lock()
				if first == nil {
					first = err
				}
				mu.Unlock()
			}
			return nil
		})
		if first != nil {
			return first
		}
		return err
	default:
		return inspectServer(ctx, client)
	}
}

// inspectServer reads one server's INFO server and memory, one section a
// command, as Redis before 7.0 (and miniredis) take them.
func inspectServer(ctx context.Context, c redis.Cmdable) error {
	var server, memory *redis.StringCmd
	_, err := c.Pipelined(ctx, func(p redis.Pipeliner) error {
		server, memory = p.Info(ctx, "server"), p.Info(ctx, "memory")
		return nil
	})
	if err != nil {
		if isRedisError(err) {
			// miniredis has no such section; Redis refuses INFO under an ACL
			// rule without it.
			return &unknownServer{err: err, miniredis: strings.Contains(err.Error(), "is not supported")}
		}
		return err
	}
	fields := map[string]string{}
	for _, line := range strings.Split(server.Val()+"\n"+memory.Val(), "\n") {
		if k, v, ok := strings.Cut(strings.TrimSpace(line), ":"); ok {
			fields[k] = v
		}
	}
	version, policy := fields["redis_version"], fields["maxmemory_policy"]
	if version == "" || policy == "" {
		return &unknownServer{err: errors.New("INFO lacks redis_version or maxmemory_policy")}
	}
	if older(version, MinRedisVersion) {
		return fmt.Errorf("%w: it is %s, and fairlock needs %s or later", errTooOld, version, MinRedisVersion)
	}
	if maxmemory, _ := strconv.ParseInt(fields["maxmemory"], 10, 64); maxmemory > 0 && policy != "noeviction" {
		return fmt.Errorf("%w: maxmemory is %d with maxmemory-policy %s, which can evict a held lock's key and let a second holder in; set maxmemory-policy noeviction, or use WithUnsafeEviction", ErrUnsafeEviction, maxmemory, policy)
	}
	return nil
}

// older tells whether version a is older than b, both "major.minor.patch".
func older(a, b string) bool {
	as, bs := strings.Split(a, "."), strings.Split(b, ".")
	for i := 0; i < 3; i++ {
		var x, y int
		if i < len(as) {
			x, _ = strconv.Atoi(as[i])
		}
		if i < len(bs) {
			y, _ = strconv.Atoi(bs[i])
		}
		if x != y {
			return x < y
		}
	}
	return false
}
