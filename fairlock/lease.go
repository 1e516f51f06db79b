package fairlock

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"time"
)

// A Lease is a held lock, or a semaphore's or read-write lock's grant. It
// ends when released, or when lost: its renewal failed, it expired, or
// Redis forgot it. Done and Err tell which. A lease that may be lost can
// still be used safely by passing Fence to the storage it guards.
type Lease struct {
	locker  *Locker
	ref     *lockRef
	kind    LockKind // what the Acquire asked for, as events report it
	permits int
	token   string
	fence   int64
	done    chan struct{}

	mu        sync.Mutex
	err       error       // nil while held
	deadline  time.Time   // before it, Redis surely still has the lease
	expiry    *time.Timer // ends the lease as lost at deadline, whatever the heartbeat is doing
	claimed   bool        // extended to the full lease TTL at least once
	releasing bool        // Release was sent: a heartbeat that finds the lock gone is no loss
	hasMeta   bool        // Redis has metadata under token to drop or keep; never changed, so read without mu
	granted   time.Time   // when Acquire handed it out, for Event.Held; zero before
}

// Name is the lock's name.
func (s *Lease) Name() string { return s.ref.name }

// Token identifies this grant: the value of a mutex's lock key in Redis, or
// the holder's member in a semaphore's or read-write lock's set of holders
// (followed by "#" and the permits it holds, when more than one).
func (s *Lease) Token() string { return s.token }

// Fence is this grant's fencing token. Fences of one lock name strictly
// increase over all grants, even across expiry of every key and a Redis
// that lost its data: the counter grows with every grant (an Acquire that
// found the lock taken may have skipped a number) and starts from the
// Redis server's time in microseconds whenever it is created anew.
// Pass it to the storage the lock guards, and have the storage reject
// writes with a fence older than the newest it has seen.
func (s *Lease) Fence() int64 { return s.fence }

// Done is closed when the lease ends, for any reason.
func (s *Lease) Done() <-chan struct{} { return s.done }

// Err is nil while the lease is held, ErrReleased after Release, and
// ErrLost if it was lost.
func (s *Lease) Err() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.err
}

// Release frees the lock, or all of the lease's permits, and grants the
// waiters at the head of the queue that now fit. It returns
// ErrNotHeld if the lease was already released or lost, and then changes
// nothing in Redis. If Redis cannot be reached, the lease still ends here
// (its renewal stops) and the lock frees itself within the lease TTL.
//
// If Redis refuses to publish the grant notification (the ACL rule lacks
// the channel pattern), the hand-off is written all the same, since a script
// keeps the writes made before a failing command, and the next waiter
// learns of its grant at its next heartbeat. Release then returns an error
// that says so and matches ErrReleased, as well as Redis's error.
func (s *Lease) Release(ctx context.Context) error {
	return s.release(ctx)
}

func (s *Lease) release(ctx context.Context) error {
	s.mu.Lock()
	ended := s.err != nil || s.releasing
	s.releasing = true
	s.mu.Unlock()
	if ended {
		return ErrNotHeld
	}
	n, err := s.ref.scripts.release.run(ctx, s.locker.client, s.ref, s.ref.call(s.token, s.ref.notify[0], s.ref.notify[1], metaFlag(s.hasMeta))).Int()
	switch {
	case err != nil:
		s.end(ErrReleased)
		if notifyRefused(err) {
			return fmt.Errorf("fairlock: release %s: the lock was handed to the next waiter, but Redis refused to notify it, so it learns of its grant at its next heartbeat (does the ACL rule lack the channel pattern?): %w; %w",
				quoteName(s.ref.name), err, ErrReleased)
		}
		return fmt.Errorf("fairlock: release %s: %w", quoteName(s.ref.name), err)
	case n == 0:
		s.end(ErrLost)
		return ErrNotHeld
	}
	s.end(ErrReleased)
	return nil
}

// Extend sets the lease's remaining time to ttl, which may shorten it. With
// auto-renew on, the heartbeat still keeps at least the lease TTL. It
// returns ErrNotHeld, changing nothing, if the lease was lost.
func (s *Lease) Extend(ctx context.Context, ttl time.Duration) error {
	if err := checkTTL("extension", ttl); err != nil {
		return err
	}
	if s.Err() != nil {
		return ErrNotHeld
	}
	sent := time.Now()
	n, err := s.ref.scripts.extend.run(ctx, s.locker.client, s.ref, s.ref.call(s.token, ttl.Milliseconds(), metaFlag(s.hasMeta))).Int()
	if err != nil {
		return fmt.Errorf("fairlock: extend %s: %w", quoteName(s.ref.name), err)
	}
	if n == 0 {
		s.end(ErrLost)
		return ErrNotHeld
	}
	s.mu.Lock()
	s.setDeadline(sent.Add(ttl))
	s.claimed = true
	s.mu.Unlock()
	return nil
}

// renewed records a heartbeat that extended the lease.
func (s *Lease) renewed(sent time.Time) {
	s.mu.Lock()
	if d := sent.Add(s.locker.cfg.leaseTTL); d.After(s.deadline) {
		s.setDeadline(d)
	}
	s.claimed = true
	s.mu.Unlock()
	s.locker.observe(s.event(EventRenewed))
}

// needsHeartbeat tells whether the next heartbeat should extend the lease:
// always with auto-renew, else only once, to turn the short grant made on a
// waiter's behalf into a full lease.
func (s *Lease) needsHeartbeat() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.err == nil && !s.releasing && (s.locker.cfg.autoRenew || !s.claimed)
}

// lose ends the lease as lost, unless it is being released: then the lock
// found gone is the release's own doing.
func (s *Lease) lose() {
	s.mu.Lock()
	releasing := s.releasing
	s.mu.Unlock()
	if !releasing {
		s.end(ErrLost)
	}
}

// setDeadline moves the local end of the lease. A lease is lost at its
// deadline unless renewed before: a heartbeat stuck on a slow reply cannot
// delay that. s.mu is held.
func (s *Lease) setDeadline(d time.Time) {
	s.deadline = d
	if s.expiry == nil {
		s.expiry = time.AfterFunc(time.Until(d), s.lose)
		return
	}
	s.expiry.Reset(time.Until(d))
}

// end closes the lease once, with err as its reason.
func (s *Lease) end(err error) {
	s.mu.Lock()
	if s.err != nil {
		s.mu.Unlock()
		return
	}
	s.err = err
	granted := s.granted
	close(s.done)
	s.expiry.Stop()
	s.mu.Unlock()

	l := s.locker
	l.mu.Lock()
	if ll := l.locks[s.ref.key()]; ll != nil {
		if i := slices.Index(ll.leases, s); i >= 0 {
			ll.leases = slices.Delete(ll.leases, i, i+1)
		}
		l.dropIfIdle(ll)
	}
	l.mu.Unlock()
	if granted.IsZero() {
		return // Acquire gave it up before handing it out, and reports that itself
	}
	kind := EventReleased
	if err == ErrLost {
		kind = EventLost
	}
	e := s.event(kind)
	e.Fence, e.Held, e.Err = s.fence, time.Since(granted), err
	l.observe(e)
}

// event starts an Event about s.
func (s *Lease) event(kind EventKind) Event {
	return Event{Kind: kind, Name: s.ref.name, Lock: s.kind, Permits: s.permits, Token: s.token}
}
