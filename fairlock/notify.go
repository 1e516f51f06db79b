package fairlock

import (
	"context"
	"strings"
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
// the scripts SPUBLISH: the message stays on the
// shard that owns the lock. A Locker then keeps one pub/sub connection per
// shard it waits on, and drops channels of locks it no longer uses.

// subscription is one channel this Locker listens on.
type subscription struct {
	name      string // lock name ("" for the one channel off Cluster)
	node      string // address of the shard's primary ("" off Cluster)
	lastUsed  time.Time
	confirmed chan struct{} // closed when Redis confirmed the subscription
	refused   chan struct{} // closed, after err is set, when Redis refused it
	err       error
}

// notifyArgs returns the command and channel prefix the scripts use to
// notify a waiter of the lock with these keys; the waiter's Locker id
// completes the channel.
func (l *Locker) notifyArgs(keys []string) (cmd, prefix string) {
	if l.sharded {
		// keys[3] is the fence key: "prefix:{name}:" and the key space.
		return "SPUBLISH", strings.TrimSuffix(keys[3], "fence") + "notify:"
	}
	return "PUBLISH", l.notifyPrefix
}

// subscribe makes sure this Locker listens on the channel of the lock,
// before a waiter queues on it, so that no grant message can come before
// the listener. A confirmation slower than a heartbeat is not waited for:
// the heartbeat finds grants whose message was missed. A refusal (the ACL
// rule lacks the channel) is Redis's error at once, not a heartbeat later.
func (l *Locker) subscribe(ctx context.Context, ref *lockRef) error {
	channel := ref.channel
	node, name := "", ""
	if cc, ok := l.client.(*redis.ClusterClient); ok {
		primary, err := cc.MasterForKey(ctx, ref.keys[0])
		if err != nil {
			return err
		}
		node, name = primary.Options().Addr, ref.name
	}
	l.subMu.Lock()
	sub := l.subs[channel]
	if sub == nil {
		sub = newSubscription(name, node)
		if err := l.listenOn(ctx, node, channel); err != nil {
			l.subMu.Unlock()
			return err
		}
		l.subs[channel] = sub
	}
	sub.lastUsed = time.Now()
	l.subMu.Unlock()
	select {
	case <-sub.confirmed:
		return nil
	default:
	}
	timer := time.NewTimer(l.heartbeat)
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

func newSubscription(name, node string) *subscription {
	return &subscription{name: name, node: node, confirmed: make(chan struct{}), refused: make(chan struct{})}
}

// listenOn subscribes channel on the connection to node, opening it (and
// its listener goroutine) if needed. The first channel goes with the
// connection: go-redis picks a Cluster node by it. l.subMu is held.
func (l *Locker) listenOn(ctx context.Context, node, channel string) error {
	select {
	case <-l.stopped:
		return ErrClosed
	default:
	}
	if ps := l.conns[node]; ps != nil {
		if l.sharded {
			return ps.SSubscribe(ctx, channel)
		}
		return ps.Subscribe(ctx, channel)
	}
	var ps *redis.PubSub
	if cc, ok := l.client.(*redis.ClusterClient); ok {
		ps = cc.SSubscribe(ctx, channel)
	} else {
		ps = l.client.Subscribe(ctx, channel)
	}
	l.conns[node] = ps
	l.bg.Add(1)
	go l.listen(ps, node)
	return nil
}

// listen routes grant messages to waiters. Off Cluster, go-redis
// reconnects and resubscribes after a drop; messages sent meanwhile are
// lost, so a resubscription triggers a heartbeat, which finds those grants.
// On Cluster go-redis would resubscribe all of a shard's channels in one
// SSUBSCRIBE, which Redis refuses when they span slots, and it does not
// follow a slot that moved: there a broken connection is replaced instead.
func (l *Locker) listen(ps *redis.PubSub, node string) {
	defer l.bg.Done()
	for {
		msg, err := ps.Receive(context.Background())
		if err != nil {
			if redis.HasErrorPrefix(err, "NOPERM") {
				// A refused subscription; the connection itself is sound.
				l.refused(node, err)
				continue
			}
			select {
			case <-l.stopped:
				return
			case <-time.After(10 * time.Millisecond):
			}
			if l.sharded {
				l.replaceConn(node, ps)
				return
			}
			continue
		}
		switch m := msg.(type) {
		case *redis.Message:
			l.mu.Lock()
			parseGrants(m.Payload, func(token string, fence int64) {
				if w := l.waiters[token]; w != nil {
					deliver(w, fence)
				}
			})
			l.mu.Unlock()
		case *redis.Subscription:
			if m.Kind == "sunsubscribe" {
				// Not asked for (dropIdleChannels forgets a channel first):
				// its slot moved to another shard.
				l.resubscribe([]string{m.Channel})
				continue
			}
			l.confirmed(m.Channel)
		}
	}
}

// replaceConn closes a shard's broken connection and subscribes its
// channels again, each on the shard that now owns its slot.
func (l *Locker) replaceConn(node string, ps *redis.PubSub) {
	ps.Close()
	if cc, ok := l.client.(*redis.ClusterClient); ok {
		ctx, cancel := context.WithTimeout(context.Background(), l.heartbeat)
		cc.ReloadState(ctx) // a failover moved slots without telling us
		cancel()
	}
	l.subMu.Lock()
	if l.conns[node] == ps {
		delete(l.conns, node)
	}
	var channels []string
	for channel, sub := range l.subs {
		if sub.node == node {
			channels = append(channels, channel)
		}
	}
	l.subMu.Unlock()
	l.resubscribe(channels)
}

// resubscribe subscribes channels again on the shards that own them now,
// for the locks still in use, and asks for a heartbeat to find grants
// whose message was lost meanwhile.
func (l *Locker) resubscribe(channels []string) {
	defer l.kickHeartbeat()
	cc, ok := l.client.(*redis.ClusterClient)
	if !ok {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), l.heartbeat)
	defer cancel()
	l.subMu.Lock()
	defer l.subMu.Unlock()
	for _, channel := range channels {
		sub := l.subs[channel]
		if sub == nil {
			continue
		}
		delete(l.subs, channel)
		primary, err := cc.MasterForKey(ctx, lockKeys(l.cfg.prefix, spaceMutex, sub.name)[0])
		if err != nil {
			continue // the next Acquire of this lock subscribes again
		}
		moved := newSubscription(sub.name, primary.Options().Addr)
		moved.lastUsed = sub.lastUsed
		if l.listenOn(ctx, moved.node, channel) == nil {
			l.subs[channel] = moved
		}
	}
}

// confirmed records Redis's confirmation of a subscription.
func (l *Locker) confirmed(channel string) {
	l.subMu.Lock()
	defer l.subMu.Unlock()
	sub := l.subs[channel]
	if sub == nil {
		return
	}
	select {
	case <-sub.confirmed:
		l.kickHeartbeat() // a resubscription: messages may have been lost
	default:
		close(sub.confirmed)
	}
}

// refused records Redis's refusal of a subscription on node's connection.
// Redis does not say which channel it refused, so every subscription there
// that is still unconfirmed fails; they all share the key prefix, so the
// ACL rule refuses all of them alike. They are forgotten, and the next
// Acquire of their locks subscribes anew.
func (l *Locker) refused(node string, err error) {
	l.subMu.Lock()
	defer l.subMu.Unlock()
	for channel, sub := range l.subs {
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
		delete(l.subs, channel)
	}
}

// dropIdleChannels unsubscribes the per-lock channels (on Cluster) of locks
// this Locker has not used for a heartbeat period, so that a process that
// touches many names does not listen on all of them forever.
func (l *Locker) dropIdleChannels() {
	if !l.sharded {
		return
	}
	l.mu.Lock()
	active := make(map[string]bool, len(l.locks))
	for key := range l.locks {
		active[key.name] = true
	}
	l.mu.Unlock()
	l.subMu.Lock()
	defer l.subMu.Unlock()
	for channel, sub := range l.subs {
		if !active[sub.name] && time.Since(sub.lastUsed) > l.heartbeat {
			delete(l.subs, channel)
			ps := l.conns[sub.node]
			if ps == nil {
				continue // its connection broke and was replaced: nothing is subscribed there
			}
			ctx, cancel := context.WithTimeout(context.Background(), l.heartbeat)
			ps.SUnsubscribe(ctx, channel) //nolint:errcheck // a channel left behind only costs a message nobody reads
			cancel()
		}
	}
}

// closeSubscriptions closes every pub/sub connection.
func (l *Locker) closeSubscriptions() error {
	l.subMu.Lock()
	defer l.subMu.Unlock()
	var first error
	for _, ps := range l.conns {
		if err := ps.Close(); err != nil && first == nil {
			first = err
		}
	}
	return first
}
