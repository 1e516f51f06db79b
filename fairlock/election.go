package fairlock

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync/atomic"

	"github.com/fairlock/fairlock/scripts"
	"github.com/redis/go-redis/v9"
)

// An Election elects one leader at a time among the processes that
// campaign for it, in the order their campaigns reached Redis among live
// candidates: it is a Mutex whose holder is the leader and whose waiters
// are the candidates, with the same bounds when a leader dies. The leader
// publishes a value (its address, say), which anyone reads with Leader and
// follows with Observe. A term's epoch is its grant's fence, so epochs
// strictly increase, across failovers too (see Lease.Fence): a store that
// rejects an epoch older than the newest it has seen fences a deposed
// leader's writes. An Election is safe for concurrent use, and costs
// nothing to make.
type Election struct {
	locker *Locker
	req    request
	// keys are those of leader.lua and proclaim.lua, boxed once: the
	// lock's key, the leader record and the log.
	keys   []any
	logKey string
}

// Election returns the election called name. It checks the name but does
// not contact Redis. An election and a lock of one name are independent.
func (l *Locker) Election(name string) (*Election, error) {
	if err := checkName(name); err != nil {
		return nil, err
	}
	ref := l.refs.get(electionKind, name)
	base := tagBase(l.cfg.prefix, name) + electionKind.space
	return &Election{locker: l, req: request{ref: ref, permits: 1},
		keys: []any{ref.keys[0], base + "leader", base + "log"}, logKey: base + "log"}, nil
}

// Name is the election's name.
func (e *Election) Name() string { return e.req.ref.name }

// Campaign waits, in FIFO order among live candidates, until this one
// leads, publishes value as the leader's, and returns the term. If ctx
// ends first, the error matches errors.Is(err, ctx.Err()) and the
// candidate has left the queue. If the value cannot be published, the
// leadership passes at once to the next candidate, and Campaign returns
// the error. A value longer than MaxValueLen is ErrInvalid. opts are
// those of an Acquire (WithMetadata, OnQueued, ...).
func (e *Election) Campaign(ctx context.Context, value string, opts ...AcquireOption) (*Term, error) {
	if err := checkValue(value); err != nil {
		return nil, err
	}
	lease, err := e.locker.acquire(ctx, e.req, true, opts)
	if err != nil {
		return nil, err
	}
	t := &Term{election: e, lease: lease}
	if err := t.Proclaim(ctx, value); err != nil {
		// A ctx that ended must not keep the leadership from passing on.
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), e.locker.cfg.leaseTTL)
		defer cancel()
		if rerr := lease.Release(rctx); rerr != nil && !errors.Is(rerr, ErrNotHeld) {
			err = errors.Join(err, rerr)
		}
		return nil, err
	}
	return t, nil
}

// Leader returns the current leader, or ErrNoLeader if nobody leads: no
// candidate holds the election, or the one just elected has not published
// its value yet. It only reads (EVALSHA_RO).
func (e *Election) Leader(ctx context.Context) (Leader, error) {
	ld, _, err := e.read(ctx)
	if err == nil && ld.Epoch == 0 {
		err = ErrNoLeader
	}
	return ld, err
}

// Observe follows the election's leaders: the channel delivers the
// current leader, if any, then each value a leader publishes, in the order
// of epoch and revision, never one older than the last it delivered. It
// reads a log that Redis keeps, not pub/sub messages, so a lost message
// loses no change. An observer that falls more than about 1000 values
// behind misses those the log dropped, and reads on from the oldest it
// kept; one whose read fails starts again from the current leader. Either
// may miss leaders in between, but never goes back. The channel is not
// buffered: read it promptly. It is closed within a heartbeat after ctx
// ends or the Locker shuts down.
func (e *Election) Observe(ctx context.Context) <-chan Leader {
	ch := make(chan Leader)
	ctx, cancel := context.WithCancel(ctx)
	stop := context.AfterFunc(e.locker.life, cancel)
	go func() {
		defer close(ch)
		defer stop()
		defer cancel()
		e.observe(ctx, ch)
	}()
	return ch
}

// observe delivers on ch until ctx ends. It starts from the leader record
// and where the log stands, and reads the log on from there; after an
// error, it starts again.
func (e *Election) observe(ctx context.Context, ch chan<- Leader) {
	var last Leader
	deliver := func(ld Leader) bool {
		if ld.Epoch < last.Epoch || ld.Epoch == last.Epoch && ld.Revision <= last.Revision {
			return true
		}
		select {
		case ch <- ld:
			last = ld
			return true
		case <-ctx.Done():
			return false
		}
	}
	wait := e.locker.cfg.heartbeat()
	from := ""
	for ctx.Err() == nil {
		if from == "" {
			ld, at, err := e.read(ctx)
			if err != nil {
				sleep(ctx, wait) //nolint:errcheck // the loop checks ctx
				continue
			}
			if from = at; ld.Epoch > 0 && !deliver(ld) {
				return
			}
			continue
		}
		streams, err := e.locker.client.XRead(ctx, &redis.XReadArgs{Streams: []string{e.logKey, from}, Count: 100, Block: wait}).Result()
		if errors.Is(err, redis.Nil) {
			continue
		}
		if err != nil {
			from = ""
			sleep(ctx, wait) //nolint:errcheck // the loop checks ctx
			continue
		}
		for _, s := range streams {
			for _, m := range s.Messages {
				from = m.ID
				ld, err := parseLeader(fmt.Sprint(m.Values["epoch"]), fmt.Sprint(m.Values["rev"]), fmt.Sprint(m.Values["value"]))
				if err == nil && !deliver(ld) {
					return
				}
			}
		}
	}
}

// read returns the leader, the zero Leader if nobody leads, and the ID of
// the log's last entry.
func (e *Election) read(ctx context.Context) (Leader, string, error) {
	reply, err := leaderScript.run(ctx, e.locker.client, e.call(), readOnly).StringSlice()
	if err == nil && len(reply) != 4 {
		err = fmt.Errorf("leader.lua replied %d values, not 4", len(reply))
	}
	if err != nil {
		return Leader{}, "", failed("leader", e.Name(), err)
	}
	if reply[0] == "" {
		return Leader{}, reply[3], nil
	}
	ld, err := parseLeader(reply[0], reply[1], reply[2])
	if err != nil {
		return Leader{}, "", failed("leader", e.Name(), err)
	}
	return ld, reply[3], nil
}

// call returns the arguments of a call of leader.lua or proclaim.lua.
func (e *Election) call(argv ...any) []any {
	args := make([]any, 3, 3+len(e.keys)+len(argv))
	args[2] = len(e.keys)
	args = append(args, e.keys...)
	return append(args, argv...)
}

// Inspect reads the election's leader (its holder) and candidates (its
// waiters), as Locker.Inspect does.
func (e *Election) Inspect(ctx context.Context) (State, error) {
	return e.locker.Inspect(ctx, LockElection, e.Name())
}

// A Leader is an election's leader as anyone sees it: the value it
// published, its term's epoch, and the value's revision within the term:
// 1 for the value it campaigned with, one more for each Proclaim.
type Leader struct {
	Value    string
	Epoch    int64
	Revision int64
}

func parseLeader(epoch, revision, value string) (Leader, error) {
	ep, err := strconv.ParseInt(epoch, 10, 64)
	if err != nil {
		return Leader{}, fmt.Errorf("leader record: epoch %q", epoch)
	}
	rev, err := strconv.ParseInt(revision, 10, 64)
	if err != nil {
		return Leader{}, fmt.Errorf("leader record: revision %q", revision)
	}
	return Leader{Value: value, Epoch: ep, Revision: rev}, nil
}

// A Term is one leader's time in office: a lease on the election, whose
// fence is its epoch. It ends when the leader resigns or loses the lease,
// as a Lease ends: a leader learns of a loss from its own clock, a margin
// before another candidate can be elected.
type Term struct {
	election *Election
	lease    *Lease
	revision atomic.Int64 // the last revision of its value sent
}

// Epoch is the term's epoch: its grant's fence.
func (t *Term) Epoch() int64 { return t.lease.Fence() }

// Done is closed when the term ends, for any reason.
func (t *Term) Done() <-chan struct{} { return t.lease.Done() }

// Err is nil while this candidate leads, ErrReleased after Resign, and
// ErrLost if the lease was lost (see Lease.Err).
func (t *Term) Err() error { return t.lease.Err() }

// Lease is the term's lease, for what a Lease does beyond a Term (Token,
// Extend, fairlocktest's checks).
func (t *Term) Lease() *Lease { return t.lease }

// Proclaim publishes value as the leader's, without giving up the
// leadership; observers see it after the term's earlier values. When
// Proclaims of one term race, the one called last wins. It returns
// ErrNotHeld, publishing nothing, if the term has ended; a value longer
// than MaxValueLen is ErrInvalid.
func (t *Term) Proclaim(ctx context.Context, value string) error {
	if err := checkValue(value); err != nil {
		return err
	}
	if t.lease.Err() != nil {
		return ErrNotHeld
	}
	e := t.election
	// A revision is written once (proclaim.lua): go-redis may send it
	// again after a lost reply.
	args := e.call(t.lease.token, t.lease.fence, t.revision.Add(1), value, scripts.FenceTTLMs)
	held, err := proclaimScript.run(ctx, e.locker.client, args, retried).Int()
	if err != nil {
		return failed("proclaim", e.Name(), err)
	}
	if held == 0 {
		// Withdrawn as a vanished record is (Lease.vanished).
		t.lease.end(ErrLost, true)
		return ErrNotHeld
	}
	return nil
}

// Resign gives up the leadership: the next candidate leads at once. It
// returns ErrNotHeld if the term had ended already (see Lease.Release).
func (t *Term) Resign(ctx context.Context) error { return t.lease.Release(ctx) }

func checkValue(value string) error {
	if len(value) > MaxValueLen {
		return fmt.Errorf("%w: leader value of %s is longer than MaxValueLen (%s)", ErrInvalid, byteSize(len(value)), byteSize(MaxValueLen))
	}
	return nil
}
