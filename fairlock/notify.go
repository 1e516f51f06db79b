package fairlock

import (
	"context"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
)

// Grant notifications. On one Redis (or Sentinel) every Locker has one
// channel, "prefix:notify:<locker id>", and the scripts PUBLISH to it. A
// message lists every grant the script made to that Locker's waiters,
// "token fence token fence ...". On Redis Cluster PUBLISH would be
// broadcast to every node, so there each lock has its own channel per
// Locker, "prefix:{name}:notify:<locker id>" ("prefix:{name}:sem:notify:..."
// for a semaphore, "rw:" for a read-write lock), in the lock's slot, and
// the scripts SPUBLISH: the message stays on the shard that owns the lock.
// A Locker then keeps one pub/sub connection per shard it waits on, and
// drops channels of locks it no longer uses.
//
// Notifications are hints: a waiter whose message is lost learns of its
// grant at its next heartbeat.

// A notifier keeps a Locker's subscriptions. Its mutex guards its maps
// only: no network call is made under it.
type notifier struct {
	client   redis.UniversalClient
	cluster  *redis.ClusterClient // nil off Cluster
	period   time.Duration        // the Locker's heartbeat
	onGrants func(payload string) // hands a message's grants to the waiters
	lost     func()               // messages may have been lost: ask for a heartbeat
	stopped  <-chan struct{}
	bg       *sync.WaitGroup

	mu    sync.Mutex
	subs  map[string]*subscription // by channel
	conns map[string]*pubsubConn   // by shard primary's address ("" off Cluster)
}

// subscription is one channel the Locker listens on.
type subscription struct {
	name      string // lock name ("" for the one channel off Cluster)
	node      string // address of the shard's primary ("" off Cluster)
	lastUsed  time.Time
	confirmed chan struct{} // closed when Redis confirmed the subscription
	refused   chan struct{} // closed, after err is set, when Redis refused it
	err       error
}

// pubsubConn is one pub/sub connection; its listener starts after its
// first subscription, which picks its Cluster node.
type pubsubConn struct {
	ps        *redis.PubSub
	listening bool
}

func newNotifier(client redis.UniversalClient, period time.Duration, stopped <-chan struct{}, bg *sync.WaitGroup, onGrants func(string), lost func()) *notifier {
	n := &notifier{client: client, period: period, onGrants: onGrants, lost: lost, stopped: stopped, bg: bg,
		subs: map[string]*subscription{}, conns: map[string]*pubsubConn{}}
	n.cluster, _ = client.(*redis.ClusterClient)
	return n
}

func newSubscription(name, node string) *subscription {
	return &subscription{name: name, node: node, lastUsed: time.Now(), confirmed: make(chan struct{}), refused: make(chan struct{})}
}

// subscribe makes sure the Locker listens on ref's channel, before a
// waiter queues on it, so that no grant message can come before the
// listener. A confirmation slower than a heartbeat is not waited for: the
// heartbeat finds grants whose message was missed. A refusal (the ACL rule
// lacks the channel) is Redis's error at once, not a heartbeat later.
func (n *notifier) subscribe(ctx context.Context, ref *lockRef) error {
	node, name := "", ""
	if n.cluster != nil {
		primary, err := n.cluster.MasterForKey(ctx, ref.keys[0])
		if err != nil {
			return err
		}
		node, name = primary.Options().Addr, ref.name
	}
	n.mu.Lock()
	sub := n.subs[ref.channel]
	fresh := sub == nil
	if fresh {
		sub = newSubscription(name, node)
		n.subs[ref.channel] = sub
	}
	sub.lastUsed = time.Now()
	n.mu.Unlock()
	if fresh {
		// In the background: a new connection's dial must not hold up the
		// Acquire longer than a heartbeat, which finds grants meanwhile.
		n.bg.Add(1)
		go func() {
			defer n.bg.Done()
			ctx, cancel := context.WithTimeout(context.Background(), n.period)
			defer cancel()
			if err := n.listenOn(ctx, node, ref.channel); err != nil {
				n.forget(ref.channel, sub)
			}
		}()
	}
	select {
	case <-sub.confirmed:
		return nil
	default:
	}
	timer := time.NewTimer(n.period)
	defer timer.Stop()
	select {
	case <-sub.confirmed:
	case <-sub.refused:
		return sub.err
	case <-timer.C:
	case <-ctx.Done():
		return ctx.Err()
	}
	return nil
}

// forget drops sub, if it is still channel's.
func (n *notifier) forget(channel string, sub *subscription) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.subs[channel] == sub {
		delete(n.subs, channel)
	}
}

// listenOn subscribes channel on the connection to node, opening it (and
// its listener) if needed.
func (n *notifier) listenOn(ctx context.Context, node, channel string) error {
	select {
	case <-n.stopped:
		return ErrClosed
	default:
	}
	n.mu.Lock()
	c := n.conns[node]
	if c == nil {
		// A connection without a channel dials nothing yet: its first
		// subscription picks its Cluster node.
		c = &pubsubConn{}
		if n.cluster != nil {
			c.ps = n.cluster.SSubscribe(ctx)
		} else {
			c.ps = n.client.Subscribe(ctx)
		}
		n.conns[node] = c
	}
	n.mu.Unlock()
	// A write that fails (a slow or broken connection) is not the
	// subscription's end: the PubSub keeps the channel and subscribes it
	// again when its listener reconnects, and the heartbeat finds grants
	// meanwhile. Redis's refusal comes as a reply, to the listener.
	if n.cluster != nil {
		c.ps.SSubscribe(ctx, channel) //nolint:errcheck // see above
	} else {
		c.ps.Subscribe(ctx, channel) //nolint:errcheck // see above
	}
	n.mu.Lock()
	start := !c.listening && n.conns[node] == c
	c.listening = true
	n.mu.Unlock()
	if start {
		n.bg.Add(1)
		go n.listen(c.ps, node)
	}
	return nil
}

// listen routes grant messages to waiters. Off Cluster, go-redis
// reconnects and resubscribes after a drop; messages sent meanwhile are
// lost, so a resubscription triggers a heartbeat, which finds those grants.
// On Cluster go-redis would resubscribe all of a shard's channels in one
// SSUBSCRIBE, which Redis refuses when they span slots, and it does not
// follow a slot that moved: there a broken connection is replaced instead.
func (n *notifier) listen(ps *redis.PubSub, node string) {
	defer n.bg.Done()
	for {
		msg, err := ps.Receive(context.Background())
		if err != nil {
			if redis.HasErrorPrefix(err, "NOPERM") {
				// A refused subscription; the connection itself is sound.
				n.refused(node, err)
				continue
			}
			select {
			case <-n.stopped:
				return
			case <-time.After(10 * time.Millisecond):
			}
			if n.cluster != nil {
				n.replaceConn(node, ps)
				return
			}
			continue
		}
		switch m := msg.(type) {
		case *redis.Message:
			n.onGrants(m.Payload)
		case *redis.Subscription:
			if m.Kind == "sunsubscribe" {
				// Not asked for (dropIdle forgets a channel first): its slot
				// moved to another shard.
				n.resubscribe([]string{m.Channel})
				continue
			}
			n.confirmed(m.Channel)
		}
	}
}

// replaceConn closes a shard's broken connection and subscribes its
// channels again, each on the shard that now owns its slot.
func (n *notifier) replaceConn(node string, ps *redis.PubSub) {
	ps.Close()
	ctx, cancel := context.WithTimeout(context.Background(), n.period)
	n.cluster.ReloadState(ctx) // a failover moved slots without telling us
	cancel()
	n.mu.Lock()
	if c := n.conns[node]; c != nil && c.ps == ps {
		delete(n.conns, node)
	}
	var channels []string
	for channel, sub := range n.subs {
		if sub.node == node {
			channels = append(channels, channel)
		}
	}
	n.mu.Unlock()
	n.resubscribe(channels)
}

// resubscribe subscribes channels again on the shards that own them now,
// for the locks still in use, and asks for a heartbeat to find grants
// whose message was lost meanwhile.
func (n *notifier) resubscribe(channels []string) {
	defer n.lost()
	if n.cluster == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), n.period)
	defer cancel()
	for _, channel := range channels {
		n.mu.Lock()
		sub := n.subs[channel]
		delete(n.subs, channel)
		n.mu.Unlock()
		if sub == nil {
			continue
		}
		primary, err := n.cluster.MasterForKey(ctx, tagBase("", sub.name)) // the slot of every key of the name
		if err != nil {
			continue // the next Acquire of this lock subscribes again
		}
		moved := newSubscription(sub.name, primary.Options().Addr)
		moved.lastUsed = sub.lastUsed
		n.mu.Lock()
		n.subs[channel] = moved
		n.mu.Unlock()
		if n.listenOn(ctx, moved.node, channel) != nil {
			n.forget(channel, moved)
		}
	}
}

// confirmed records Redis's confirmation of a subscription.
func (n *notifier) confirmed(channel string) {
	n.mu.Lock()
	defer n.mu.Unlock()
	sub := n.subs[channel]
	if sub == nil {
		return
	}
	select {
	case <-sub.confirmed:
		n.lost() // a resubscription: messages may have been lost
	default:
		close(sub.confirmed)
	}
}

// refused records Redis's refusal of a subscription on node's connection.
// Redis does not say which channel it refused, so every subscription there
// that is still unconfirmed fails; they all share the key prefix, so the
// ACL rule refuses all of them alike. They are forgotten, and the next
// Acquire of their locks subscribes anew.
func (n *notifier) refused(node string, err error) {
	n.mu.Lock()
	defer n.mu.Unlock()
	for channel, sub := range n.subs {
		if sub.node != node {
			continue
		}
		select {
		case <-sub.confirmed:
			continue
		default:
		}
		sub.err = err
		close(sub.refused)
		delete(n.subs, channel)
	}
}

// dropIdle unsubscribes the per-lock channels (on Cluster) of locks not in
// use for a heartbeat period, so that a process that touches many names
// does not listen on all of them forever.
func (n *notifier) dropIdle(inUse func(name string) bool) {
	if n.cluster == nil {
		return
	}
	type idle struct {
		ps      *redis.PubSub
		channel string
	}
	var drop []idle
	n.mu.Lock()
	for channel, sub := range n.subs {
		if !inUse(sub.name) && time.Since(sub.lastUsed) > n.period {
			delete(n.subs, channel)
			if c := n.conns[sub.node]; c != nil {
				drop = append(drop, idle{c.ps, channel})
			}
		}
	}
	n.mu.Unlock()
	for _, d := range drop {
		ctx, cancel := context.WithTimeout(context.Background(), n.period)
		d.ps.SUnsubscribe(ctx, d.channel) //nolint:errcheck // a channel left behind only costs a message nobody reads
		cancel()
	}
}

// close closes every pub/sub connection.
func (n *notifier) close() error {
	n.mu.Lock()
	conns := make([]*redis.PubSub, 0, len(n.conns))
	for _, c := range n.conns {
		conns = append(conns, c.ps)
	}
	n.mu.Unlock()
	var first error
	for _, ps := range conns {
		if err := ps.Close(); err != nil && first == nil {
			first = err
		}
	}
	return first
}
