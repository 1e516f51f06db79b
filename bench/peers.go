package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"math"
	"net"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/bsm/redislock"
	"github.com/go-redsync/redsync/v4"
	rsgoredis "github.com/go-redsync/redsync/v4/redis/goredis/v9"
	"github.com/redis/go-redis/v9"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/client/v3/concurrency"
	"google.golang.org/grpc"
)

// counters are the client-side counts of one or more go-redis clients.
type counters struct {
	mu         sync.Mutex
	byName     map[string]int64 // per command; EVALSHA by script name
	roundTrips atomic.Int64     // one per Process call, one per pipeline
	commands   atomic.Int64     // commands sent, pipelines counted per command
	dials      atomic.Int64     // TCP connections opened (pool + pub/sub)
}

type countSnap struct {
	RoundTrips, Commands, Dials int64
	Names                       map[string]int64 `json:",omitempty"`
}

func (c *counters) snap() countSnap {
	return countSnap{c.roundTrips.Load(), c.commands.Load(), c.dials.Load(), c.names()}
}

func (a countSnap) sub(b countSnap) countSnap {
	return countSnap{a.RoundTrips - b.RoundTrips, a.Commands - b.Commands, a.Dials - b.Dials, subNames(a.Names, b.Names)}
}

// countHook is a redis.Hook counting round trips, commands and dials.
type countHook struct{ c *counters }

func (h countHook) DialHook(next redis.DialHook) redis.DialHook {
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		h.c.dials.Add(1)
		return next(ctx, network, addr)
	}
}

// connInit reports commands go-redis sends when it opens a connection
// (HELLO, CLIENT SETINFO): counted by name, not as the lock's round trips.
func connInit(cmd redis.Cmder) bool {
	switch strings.ToLower(cmd.Name()) {
	case "hello", "auth", "select":
		return true
	case "client":
		a := cmd.Args()
		if len(a) > 1 {
			s, _ := a[1].(string)
			return strings.EqualFold(s, "setinfo") || strings.EqualFold(s, "setname")
		}
	}
	return false
}

func (h countHook) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		h.c.count(cmd)
		if !connInit(cmd) {
			h.c.roundTrips.Add(1)
			h.c.commands.Add(1)
		}
		return next(ctx, cmd)
	}
}

func (h countHook) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		n := 0
		for _, cmd := range cmds {
			h.c.count(cmd)
			if !connInit(cmd) {
				n++
			}
		}
		if n > 0 {
			h.c.roundTrips.Add(1)
			h.c.commands.Add(int64(n))
		}
		return next(ctx, cmds)
	}
}

func newRedisClient(addr string, c *counters) *redis.Client {
	return newRedisClientPool(addr, 0, c)
}

// newRedisClientPool is newRedisClient with a pool of poolSize connections
// (0: go-redis's default, 10 per CPU).
func newRedisClientPool(addr string, poolSize int, c *counters) *redis.Client {
	cl := redis.NewClient(&redis.Options{Addr: addr, PoolSize: poolSize})
	if c != nil {
		cl.AddHook(countHook{c})
	}
	return cl
}

// client is a worker's client on the env's Redis, with its pool size.
func (e *env) client(c *counters) *redis.Client {
	return newRedisClientPool(e.RedisAddr, e.PoolSize, c)
}

// unlockFunc releases a lock obtained by worker.Lock.
type unlockFunc func(ctx context.Context) error

// worker is one client of a lock implementation: its own connection(s).
type worker interface {
	Lock(ctx context.Context, name string) (unlockFunc, error)
	Close() error
}

// peer builds workers. concurrent reports whether one worker may be used by
// many goroutines at once (needed by the scale scenario). Kinds, where the
// peer has a semaphore and a read-write lock, builds their workers for the
// semaphore and read-write lock rows.
type peer struct {
	Name         string
	Settings     string
	Redis        bool // talks to Redis (round trips counted by the hook)
	Concurrent   bool
	New          func(env *env, c *counters) (worker, error)
	Kinds        func(env *env, c *counters) (kindWorker, error)
	KindSettings string
}

type env struct {
	RedisAddr    string
	EtcdEndpoint string
	SpinDelay    time.Duration
	LeaseTTL     time.Duration
	// PoolSize is the go-redis pool size of each worker's client, 0 for
	// go-redis's default (the uncontended row uses 1, as a plain loop does).
	PoolSize int
	// Aging is fairlock's WithPriorityAging of each worker's Locker, 0
	// for the default (the priority-lanes row's run with priorities sets
	// it, so that aging shows within the row).
	Aging time.Duration
}

// tokenBase and tokenSeq make the spinners' tokens: a random prefix per
// process and a counter, unique as a random token is, and as cheap as
// fairlock's own (its session and a sequence number), so that no peer
// pays more for its token than another.
var (
	tokenBase = func() string {
		var b [8]byte
		_, _ = rand.Read(b[:])
		return hex.EncodeToString(b[:]) + ":"
	}()
	tokenSeq atomic.Uint64
)

func token() string { return tokenBase + strconv.FormatUint(tokenSeq.Add(1), 36) }

// ---------------------------------------------------------------- naive

// compare-and-delete, the release every correct SET NX lock uses.
var naiveRelease = redis.NewScript(`if redis.call("get", KEYS[1]) == ARGV[1] then return redis.call("del", KEYS[1]) else return 0 end`)

type naiveWorker struct {
	cl    *redis.Client
	ttl   time.Duration
	delay time.Duration
}

func (w *naiveWorker) Lock(ctx context.Context, name string) (unlockFunc, error) {
	tok := token()
	key := "naive:" + name
	if _, err := spin(ctx, w.delay, func() (bool, error) {
		return w.cl.SetNX(ctx, key, tok, w.ttl).Result()
	}); err != nil {
		return nil, err
	}
	return func(ctx context.Context) error {
		return naiveRelease.Run(ctx, w.cl, []string{key}, tok).Err()
	}, nil
}

func (w *naiveWorker) Close() error { return w.cl.Close() }

// ---------------------------------------------------------------- redislock

type redislockWorker struct {
	cl    *redis.Client
	lc    *redislock.Client
	ttl   time.Duration
	delay time.Duration
}

func (w *redislockWorker) Lock(ctx context.Context, name string) (unlockFunc, error) {
	// README: LinearBackoff with a context deadline for blocking acquisition.
	// The strategy holds no state for linear backoff, but build one per call
	// anyway, as its doc asks.
	l, err := w.lc.Obtain(ctx, "redislock:"+name, w.ttl, &redislock.Options{
		RetryStrategy: redislock.LinearBackoff(w.delay),
	})
	if err != nil {
		return nil, err
	}
	return l.Release, nil
}

func (w *redislockWorker) Close() error { return w.cl.Close() }

// ---------------------------------------------------------------- redsync

type redsyncWorker struct {
	cl    *redis.Client
	rs    *redsync.Redsync
	ttl   time.Duration
	delay time.Duration
}

func (w *redsyncWorker) Lock(ctx context.Context, name string) (unlockFunc, error) {
	m := w.rs.NewMutex("redsync:"+name,
		redsync.WithExpiry(w.ttl),
		redsync.WithTries(math.MaxInt32),
		redsync.WithRetryDelay(w.delay))
	if err := m.LockContext(ctx); err != nil {
		return nil, err
	}
	return func(ctx context.Context) error {
		ok, err := m.UnlockContext(ctx)
		if err == nil && !ok {
			err = errors.New("redsync: unlock failed")
		}
		return err
	}, nil
}

func (w *redsyncWorker) Close() error { return w.cl.Close() }

// ---------------------------------------------------------------- etcd

type etcdWorker struct {
	cli  *clientv3.Client
	sess *concurrency.Session
}

func (w *etcdWorker) Lock(ctx context.Context, name string) (unlockFunc, error) {
	// One Mutex per session and name: a session's mutex key is prefix+leaseID,
	// so a worker must not run two Locks at once (the scale scenario skips etcd).
	m := concurrency.NewMutex(w.sess, "/bench-lock/"+name)
	if err := m.Lock(ctx); err != nil {
		return nil, err
	}
	return m.Unlock, nil
}

func (w *etcdWorker) Close() error {
	w.sess.Close()
	return w.cli.Close()
}

func newEtcdWorker(e *env, c *counters) (worker, error) {
	if e.EtcdEndpoint == "" {
		return nil, errors.New("no etcd endpoint")
	}
	cfg := clientv3.Config{
		Endpoints:   []string{e.EtcdEndpoint},
		DialTimeout: 5 * time.Second,
	}
	if c != nil {
		// Round trips of etcd: unary RPCs (Txn, Get, Delete, ...). Watches
		// ride on a gRPC stream and are counted by name only.
		cfg.DialOptions = []grpc.DialOption{
			grpc.WithChainUnaryInterceptor(func(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
				c.roundTrips.Add(1)
				c.commands.Add(1)
				c.countName("grpc:" + method[strings.LastIndexByte(method, '/')+1:])
				return invoker(ctx, method, req, reply, cc, opts...)
			}),
			grpc.WithChainStreamInterceptor(func(ctx context.Context, desc *grpc.StreamDesc, cc *grpc.ClientConn, method string, streamer grpc.Streamer, opts ...grpc.CallOption) (grpc.ClientStream, error) {
				c.countName("grpc-stream:" + method[strings.LastIndexByte(method, '/')+1:])
				return streamer(ctx, desc, cc, method, opts...)
			}),
		}
	}
	cli, err := clientv3.New(cfg)
	if err != nil {
		return nil, err
	}
	sess, err := concurrency.NewSession(cli, concurrency.WithTTL(int(math.Max(1, e.LeaseTTL.Seconds()))))
	if err != nil {
		cli.Close()
		return nil, fmt.Errorf("etcd session: %w", err)
	}
	return &etcdWorker{cli: cli, sess: sess}, nil
}

// ---------------------------------------------------------------- registry

func allPeers() []peer {
	return []peer{
		fairlockPeer(),
		fairlockSharedPeer(),
		{
			Name:       "redislock",
			Settings:   "bsm/redislock v0.10.0, Obtain with RetryStrategy LinearBackoff(spin), ctx deadline, TTL=lease",
			Redis:      true,
			Concurrent: true,
			New: func(e *env, c *counters) (worker, error) {
				cl := e.client(c)
				return &redislockWorker{cl: cl, lc: redislock.New(cl), ttl: e.LeaseTTL, delay: e.SpinDelay}, nil
			},
		},
		{
			Name:       "redsync",
			Settings:   "go-redsync/redsync/v4 v4.18.1 + goredis/v9 pool, WithTries(MaxInt32), WithRetryDelay(spin), WithExpiry(lease)",
			Redis:      true,
			Concurrent: true,
			New: func(e *env, c *counters) (worker, error) {
				cl := e.client(c)
				return &redsyncWorker{cl: cl, rs: redsync.New(rsgoredis.NewPool(cl)), ttl: e.LeaseTTL, delay: e.SpinDelay}, nil
			},
		},
		{
			Name:       "naive",
			Settings:   "SET key tok NX PX lease; on failure sleep spin and retry; release = Lua compare-and-delete (EVALSHA)",
			Redis:      true,
			Concurrent: true,
			New: func(e *env, c *counters) (worker, error) {
				return &naiveWorker{cl: e.client(c), ttl: e.LeaseTTL, delay: e.SpinDelay}, nil
			},
			Kinds: func(e *env, c *counters) (kindWorker, error) {
				return &naiveKindWorker{cl: e.client(c), ttl: e.LeaseTTL, delay: e.SpinDelay}, nil
			},
			KindSettings: "semaphore: one Lua script (EVALSHA) drops expired holders from a sorted set member->deadline and admits if held+n <= capacity, else sleep spin and retry; release = ZREM. " +
				"Read-write lock, not fair: a reader is admitted whenever no writer holds, a writer only when nobody holds (one script), else sleep spin and retry; release = ZREM (reader) or compare-and-delete (writer). Leases = lease",
		},
		{
			Name:     "etcd",
			Settings: "go.etcd.io/etcd/client/v3 v3.7.3 concurrency.Mutex, one Session (TTL=lease) per worker, against Debian etcd-server",
			New: func(e *env, c *counters) (worker, error) {
				return newEtcdWorker(e, c)
			},
		},
	}
}

func peerByName(name string) (peer, bool) {
	for _, p := range allPeers() {
		if p.Name == name {
			return p, true
		}
	}
	return peer{}, false
}

// scriptNames maps a script SHA1 to a readable name for the per-command
// counts ("evalsha:release").
var scriptNames = map[string]string{}

func nameScript(name string, s *redis.Script) { scriptNames[s.Hash()] = name }

func init() { nameScript("naive-release", naiveRelease) }

func cmdName(cmd redis.Cmder) string {
	n := strings.ToLower(cmd.Name())
	if n == "evalsha" || n == "eval" {
		args := cmd.Args()
		if len(args) > 1 {
			if s, ok := args[1].(string); ok {
				if sn, ok := scriptNames[s]; ok {
					return n + ":" + sn
				}
			}
		}
	}
	return n
}

func (c *counters) count(cmd redis.Cmder) { c.countName(cmdName(cmd)) }

func (c *counters) countName(n string) {
	c.mu.Lock()
	if c.byName == nil {
		c.byName = map[string]int64{}
	}
	c.byName[n]++
	c.mu.Unlock()
}

// names returns a copy of the per-command counts.
func (c *counters) names() map[string]int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	m := make(map[string]int64, len(c.byName))
	for k, v := range c.byName {
		m[k] = v
	}
	return m
}

func subNames(a, b map[string]int64) map[string]int64 {
	m := map[string]int64{}
	for k, v := range a {
		if d := v - b[k]; d != 0 {
			m[k] = d
		}
	}
	return m
}
