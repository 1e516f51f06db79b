// Package fairlocktest helps test code that uses fairlock, without a Redis
// server: it starts an in-process miniredis and hands out ready Lockers, and
// its Recorder collects the Lockers' events so a test can assert the order
// in which a lock was granted, and, for a Semaphore or an RWMutex, that no
// more permits were held than its capacity and that no writer shared it.
// It is a package of its own so that the library does not depend on
// miniredis; only tests that import it do.
//
// A typical test:
//
//	func TestJobsRunInArrivalOrder(t *testing.T) {
//		rec := fairlocktest.NewRecorder()
//		locker := fairlocktest.New(t, rec.Option())
//		// ... run the code under test with locker ...
//		rec.AssertFIFO(t, "jobs")
//	}
//
// Several Lockers on one server stand in for several processes:
//
//	srv := fairlocktest.NewServer(t)
//	a, b := srv.Locker(t, rec.Option()), srv.Locker(t, rec.Option())
//
// For a Semaphore or an RWMutex, release through the Recorder, so that it
// knows when each lease was given back (see Recorder.Release):
//
//	lease, err := sem.Acquire(ctx, 2)
//	// ... work ...
//	rec.Release(ctx, lease)
//	// ... and once all are done:
//	rec.AssertCapacity(t, "exports", 3)
//	rec.AssertExclusive(t, "config") // an RWMutex: no writer shared it
//
// The embedded server expires keys as wall-clock time passes, like Redis,
// so lease and waiter TTLs behave as in production; use short TTLs
// (fairlock.WithLeaseTTL(200*time.Millisecond)) to keep such tests fast.
// miniredis is faithful enough for unit tests of code that uses a lock; the
// lock's own timing and failure behaviour are proven against a real Redis.
//
// Everything is closed by t.Cleanup. Cleanups run after deferred calls, so
// check for goroutine leaks with goleak.VerifyTestMain, not a deferred
// goleak.VerifyNone.
package fairlocktest

import (
	"errors"
	"sync"
	"testing"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"

	"github.com/fairlock/fairlock/fairlock"
)

// Server is an in-process miniredis together with the clients and Lockers
// made from it. Its methods are safe for concurrent use.
type Server struct {
	mini *miniredis.Miniredis
	addr string

	mu      sync.Mutex
	closed  bool
	clients []*redis.Client
	lockers []*fairlock.Locker
}

// StartServer starts an in-process miniredis that expires keys in real
// time. Call Close when done; in tests, NewServer does that for you.
func StartServer() (*Server, error) {
	m := miniredis.NewMiniRedis()
	m.ClockTTL(true) // leases expire on their own, as in Redis
	if err := m.Start(); err != nil {
		return nil, err
	}
	return &Server{mini: m, addr: m.Addr()}, nil
}

// NewServer starts a server for the test and closes it when the test ends.
func NewServer(t testing.TB) *Server {
	t.Helper()
	s, err := StartServer()
	if err != nil {
		t.Fatalf("fairlocktest: start miniredis: %v", err)
	}
	t.Cleanup(func() {
		if err := s.Close(); err != nil {
			t.Errorf("fairlocktest: close: %v", err)
		}
	})
	return s
}

// New starts a server for the test and returns a Locker on it, made with
// opts. Both are closed when the test ends.
func New(t testing.TB, opts ...fairlock.Option) *fairlock.Locker {
	t.Helper()
	return NewServer(t).Locker(t, opts...)
}

// Addr is the server's host:port.
func (s *Server) Addr() string { return s.addr }

// Miniredis gives direct access to the server, for example to inspect keys,
// FastForward its clock, or make it fail with SetError.
func (s *Server) Miniredis() *miniredis.Miniredis { return s.mini }

// Client returns a new client to the server, closed with the server. After
// Close it returns a closed client.
func (s *Server) Client() *redis.Client {
	c := redis.NewClient(&redis.Options{Addr: s.addr})
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		c.Close()
	} else {
		s.clients = append(s.clients, c)
	}
	return c
}

// NewLocker returns a Locker with its own client, as a separate process
// would have. It is closed with the server.
func (s *Server) NewLocker(opts ...fairlock.Option) (*fairlock.Locker, error) {
	s.mu.Lock()
	closed := s.closed
	s.mu.Unlock()
	if closed {
		return nil, fairlock.ErrClosed
	}
	l, err := fairlock.New(s.Client(), opts...)
	if err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		l.Close()
		return nil, fairlock.ErrClosed
	}
	s.lockers = append(s.lockers, l)
	return l, nil
}

// Locker is NewLocker for tests: it fails the test on error.
func (s *Server) Locker(t testing.TB, opts ...fairlock.Option) *fairlock.Locker {
	t.Helper()
	l, err := s.NewLocker(opts...)
	if err != nil {
		t.Fatalf("fairlocktest: new locker: %v", err)
	}
	return l
}

// Close closes the Lockers (releasing what they hold), then the clients,
// then the server. It is idempotent.
func (s *Server) Close() error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil
	}
	s.closed = true
	lockers, clients := s.lockers, s.clients
	s.mu.Unlock()

	var errs []error
	for _, l := range lockers {
		errs = append(errs, l.Close())
	}
	for _, c := range clients {
		errs = append(errs, c.Close())
	}
	s.mini.Close()
	return errors.Join(errs...)
}
