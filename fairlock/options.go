package fairlock

import (
	"context"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"time"

	"github.com/fairlock/fairlock/scripts"
)

// Defaults of a Locker.
const (
	// DefaultLeaseTTL is how long a lease outlives its holder's last renewal.
	DefaultLeaseTTL = 10 * time.Second
	// DefaultWaiterTTL is how long a waiter that stopped heart-beating (its
	// process died) keeps its place in the queue.
	DefaultWaiterTTL = 3 * time.Second
	// DefaultKeyPrefix starts every key and channel name.
	DefaultKeyPrefix = "fairlock"
	// DefaultPriorityAging is how long a waiter waits for each level its
	// priority rises (WithPriorityAging).
	DefaultPriorityAging = scripts.DefaultAgingMs * time.Millisecond
)

type config struct {
	leaseTTL       time.Duration
	waiterTTL      time.Duration
	autoRenew      bool
	prefix         string
	observer       func(Event)
	logger         *slog.Logger
	unsafeEviction bool
	aging          time.Duration // WithPriorityAging

	replicas       int // WithReplicaAck
	replicaTimeout time.Duration
}

func defaultConfig() config {
	return config{
		leaseTTL:  DefaultLeaseTTL,
		waiterTTL: DefaultWaiterTTL,
		autoRenew: true,
		prefix:    DefaultKeyPrefix,
		aging:     DefaultPriorityAging,
	}
}

// An Option configures a Locker in New.
type Option func(*config) error

// WithLeaseTTL sets how long a lease lives if its holder stops renewing it
// (DefaultLeaseTTL). With auto-renew on, it is also how long a crashed
// holder blocks the queue.
func WithLeaseTTL(d time.Duration) Option {
	return func(c *config) error {
		c.leaseTTL = d
		return checkTTL("lease TTL", d)
	}
}

// WithWaiterTTL sets how long a silent waiter, whose process died, keeps its
// place in the queue (DefaultWaiterTTL), including a waiter that was granted
// the lock just before it died. Waiters heartbeat every Heartbeat() period.
func WithWaiterTTL(d time.Duration) Option {
	return func(c *config) error {
		c.waiterTTL = d
		return checkTTL("waiter TTL", d)
	}
}

// WithPriorityAging sets how long a waiter of the Locker waits for each
// level its priority rises (DefaultPriorityAging): a waiter of priority p
// (WithPriority) ranks as p+1 after waiting d, p+2 after 2d, up to
// MaxPriority, on Redis's clock, so none waits forever behind requests of
// higher priority: at most (MaxPriority - p) × d more than it would wait
// behind the waiters that came before it, were they all of one priority.
// Each request carries its Locker's aging. d is at least 1ms.
func WithPriorityAging(d time.Duration) Option {
	return func(c *config) error {
		c.aging = d
		return checkTTL("priority aging", d)
	}
}

// WithAutoRenew turns lease renewal on (the default) or off. When on, held
// leases are extended every heartbeat until Release; when off, a lease
// lives the lease TTL from its grant unless Extend is called.
func WithAutoRenew(on bool) Option {
	return func(c *config) error {
		c.autoRenew = on
		return nil
	}
}

// WithKeyPrefix sets the namespace of every key and channel
// (DefaultKeyPrefix). It must not contain '{' or '}', which Redis Cluster
// reads as a hash tag: the lock name alone is each lock's hash tag.
func WithKeyPrefix(p string) Option {
	return func(c *config) error {
		if strings.ContainsAny(p, "{}") {
			return fmt.Errorf("%w: key prefix %s must not contain '{' or '}'", ErrInvalid, quoteName(p))
		}
		c.prefix = p
		return nil
	}
}

// WithObserver registers fn to receive every Event of the Locker. fn is
// called synchronously, on the goroutine that made the step (Event's doc
// lists them), possibly from several at once, and must not block. The
// module github.com/fairlock/fairlock/contrib/otel turns the events into
// OpenTelemetry metrics.
func WithObserver(fn func(Event)) Option {
	return func(c *config) error {
		if fn == nil {
			return fmt.Errorf("%w: nil observer", ErrInvalid)
		}
		c.observer = fn
		return nil
	}
}

// WithLogger logs every Event to l: grants, releases and renewals at Debug,
// lost leases and failed heartbeats at Warn.
func WithLogger(l *slog.Logger) Option {
	return func(c *config) error {
		if l == nil {
			return fmt.Errorf("%w: nil logger", ErrInvalid)
		}
		c.logger = l
		return nil
	}
}

// WithUnsafeEviction lets the Locker use a Redis that may evict keys
// (maxmemory set with a maxmemory-policy other than noeviction), which it
// refuses otherwise with ErrUnsafeEviction. An evicted key can let a second
// holder in while the first still runs, and lose waiters' places; fencing
// is then what protects the resource. The Locker logs one warning.
func WithUnsafeEviction() Option {
	return func(c *config) error {
		c.unsafeEviction = true
		return nil
	}
}

// check validates the options together, once all are applied.
func (c *config) check() error {
	if hb := heartbeatOf(c.leaseTTL, c.waiterTTL); hb < MinHeartbeat {
		return fmt.Errorf("%w: lease TTL %v and waiter TTL %v give a heartbeat of %v, below the floor MinHeartbeat (%v): both TTLs must be at least %v",
			ErrInvalid, c.leaseTTL, c.waiterTTL, hb, MinHeartbeat, 3*MinHeartbeat)
	}
	return nil
}

// heartbeatOf is the heartbeat period of a Locker with these TTLs.
func heartbeatOf(leaseTTL, waiterTTL time.Duration) time.Duration {
	return min(leaseTTL, waiterTTL) / 3
}

// heartbeat is the Locker's period: it renews its session (so its leases
// and waiters) and checks its waiters once per period.
func (c *config) heartbeat() time.Duration { return heartbeatOf(c.leaseTTL, c.waiterTTL) }

// waitTTL is how long the session keeps its waiters alive after its last
// renewal: never longer than its leases, so that a waiter granted a lock
// is a live holder.
func (c *config) waitTTL() time.Duration { return min(c.waiterTTL, c.leaseTTL) }

// keepTTL is how long the records of a lock live after their last write:
// the lock's keys, and the record of a lease with auto-renew. Liveness comes
// from the session, renewed every heartbeat; a record only has to outlive
// it, so it is renewed every keepTTL/3, which makes holding many locks
// cheap. A dead session's records are ignored by everyone long before they
// expire.
func (c *config) keepTTL() time.Duration { return 30 * max(c.leaseTTL, c.waiterTTL) }

// recordTTL is the TTL of a grant's record: keepTTL with auto-renew, else
// the lease TTL, which then ends the lease unless Extend is called.
func (c *config) recordTTL() time.Duration {
	if c.autoRenew {
		return c.keepTTL()
	}
	return c.leaseTTL
}

// margin is how much sooner than Redis a holder ends its lease when
// renewals fail: a holder that is not paused for longer than this learns of
// the loss before anyone else can be granted (see Lease).
func (c *config) margin() time.Duration { return c.leaseTTL / 10 }

// waitMargin is the same for what lives by the session's waiters' key: its
// waiters, and the grants it has not taken up yet.
func (c *config) waitMargin() time.Duration { return c.waitTTL() / 10 }

func checkTTL(what string, d time.Duration) error {
	switch {
	case d < time.Millisecond:
		return fmt.Errorf("%w: %s must be at least 1ms (Redis counts in ms), got %v", ErrInvalid, what, d)
	case d > MaxTTL:
		return fmt.Errorf("%w: %s %v is above MaxTTL (%v)", ErrInvalid, what, d, MaxTTL)
	}
	return nil
}

// An AcquireOption configures one Acquire or TryAcquire call. A nil one
// is ErrInvalid, as a nil Option is New's.
type AcquireOption func(*acquireConfig)

type acquireConfig struct {
	onQueued   func(position int)
	onPosition func(position int)
	metadata   string
	group      string
	hasGroup   bool
	weight     int
	hasWeight  bool
	priority   int
	multi      string // the multiTag of a MultiMutex request's part, "" if none
}

// OnQueued calls fn each time the call joins the queue, with its position
// (1 is next) among live waiters, not counting the holder. It is called
// again if the waiter lost its place and queued anew.
func OnQueued(fn func(position int)) AcquireOption {
	return func(c *acquireConfig) { c.onQueued = fn }
}

// OnPosition calls fn with the waiter's position (1 is next) when it joins
// the queue, as OnQueued does, and again whenever the position has changed
// while it waits. Changes are learnt from the heartbeat, so they come at
// most once per Heartbeat period and cost no extra round trip; fn runs on
// the heartbeat goroutine and must not block. A last call may come just
// after the grant. The Locker's observer and logger get the same changes
// as EventMoved; they get none for waiters that did not ask: following a
// place costs Redis a count every heartbeat, several times what asking
// whether the waiter is still queued does.
func OnPosition(fn func(position int)) AcquireOption {
	return func(c *acquireConfig) { c.onPosition = fn }
}

// WithMetadata stores s with the waiter in Redis and then with its lease,
// for operators: Inspect (State.Metadata) and the fairlock command show
// it. It is dropped when the waiter or lease ends.
// Anyone who can read the lock's keys can read it: put no secret in it.
// An s longer than MaxMetadataLen makes Acquire and TryAcquire return
// ErrInvalid before any Redis call; "" stores nothing, at no cost.
func WithMetadata(s string) AcquireOption {
	return func(c *acquireConfig) { c.metadata = s }
}

// WithGroup makes a semaphore request part of group, a tenant or a
// customer, for fair share across groups: while groups wait, each gets a
// share of the permit-time (permits × time held) in proportion to its
// weight (WithGroupWeight, 1 by default), so at equal weights a group
// whose holds are longer gets fewer grants. When permits come free, the
// next grant goes to the group that used the least permit-time for its
// weight; a group that starts to wait cannot claim credit for the time it
// was away. Within a group, requests are granted in strict FIFO order,
// and a group's head that does not fit holds up everyone, so a large
// request is never starved. Requests without a group form one group of
// their own, of weight 1. The mutex and the read-write lock take no
// groups: Acquire returns ErrInvalid. The name is at most MaxGroupLen
// bytes and not empty.
func WithGroup(name string) AcquireOption {
	return func(c *acquireConfig) { c.group, c.hasGroup = name, true }
}

// MaxGroupWeight is the largest weight WithGroupWeight takes.
const MaxGroupWeight = 1000

// WithGroupWeight gives the request's group (WithGroup, which it needs)
// weight w, from 1 to MaxGroupWeight, 1 by default: while groups wait, a
// group of weight 2 gets twice the permit-time of a group of weight 1. A
// group's weight is the one its most recent request named, and Inspect
// shows it. WithGroupLimit still caps every group, whatever its weight.
// Outside that range, or without WithGroup, Acquire returns ErrInvalid.
func WithGroupWeight(w int) AcquireOption {
	return func(c *acquireConfig) { c.weight, c.hasWeight = w, true }
}

// MaxPriority is the highest priority WithPriority takes.
const MaxPriority = 9

// WithPriority gives a mutex or semaphore request priority p, from 0 (the
// default) to MaxPriority: a waiter of higher priority is granted before
// every waiter of lower priority, and within one priority the order is
// the usual one (FIFO, or the groups' fair share). Waiting raises a
// waiter's priority one level per aging (WithPriorityAging), so no waiter
// waits forever. The head-of-line rule holds across priorities: when the
// waiter to be granted next does not fit, nobody is granted. TryAcquire
// takes a priority too, and still never passes a waiter. Requests without
// a priority cost what they always did. Outside 0..MaxPriority, or on a
// read-write lock, whose waiters are granted in arrival order only (see
// RWMutex), Acquire returns ErrInvalid.
func WithPriority(p int) AcquireOption {
	return func(c *acquireConfig) { c.priority = p }
}

// A SemaphoreOption configures a Semaphore in Locker.Semaphore.
type SemaphoreOption func(*semaphoreConfig) error

type semaphoreConfig struct {
	groupLimit int
}

// WithGroupLimit caps the permits any one group (WithGroup) may hold at
// once at k, even while the other groups are idle; requests without a
// group count as one group. Every process must use the same limit for a
// name, as with the capacity: while the semaphore is in use, an Acquire
// with another limit fails with ErrInvalid.
func WithGroupLimit(k int) SemaphoreOption {
	return func(c *semaphoreConfig) error {
		if k < 1 {
			return fmt.Errorf("%w: group limit %d is below 1", ErrInvalid, k)
		}
		c.groupLimit = k
		return nil
	}
}

// wantsPositions tells whether anyone listens for EventEnqueued's
// position, which costs Redis a count as the waiter queues. EventMoved
// comes only for waiters that asked OnPosition.
func (c *config) wantsPositions() bool {
	return c.observer != nil || c.logger != nil
}

func (c *config) observe(e Event) {
	if c.observer != nil {
		c.observer(e)
	}
	if c.logger == nil {
		return
	}
	level := slog.LevelDebug
	if e.Kind == EventLost || e.Kind == EventHeartbeatFailed || e.Kind == EventWarning {
		level = slog.LevelWarn
	}
	c.logger.LogAttrs(context.Background(), level, "fairlock "+e.Kind.String(),
		slog.String("name", logName(e.Name)), slog.String("token", e.Token),
		slog.Int("position", e.Position), slog.Int64("fence", e.Fence),
		slog.Duration("wait", e.Wait), slog.Duration("held", e.Held),
		slog.Bool("queued", e.Queued), slog.Any("err", e.Err))
}

// lane is what a token carries for its priority and its Locker's aging
// (scripts/lib/lanes.lua): nothing for the defaults.
func (c *config) lane(priority int) string {
	if priority == 0 && c.aging == DefaultPriorityAging {
		return ""
	}
	return "!" + strconv.Itoa(priority) + "/" + strconv.FormatInt(c.aging.Milliseconds(), 10)
}
