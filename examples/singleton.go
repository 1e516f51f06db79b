package main

import (
	"context"
	"fmt"
	"io"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/fairlock/fairlock/examples/internal/exampleredis"
	"github.com/fairlock/fairlock/fairlock"
)

// runJob records one run of the job in a Redis hash, if epoch is at least
// the epoch of the last run: a deposed leader's late run is refused.
var runJob = redis.NewScript(`
local last = tonumber(redis.call('HGET', KEYS[1], 'epoch') or '0')
if tonumber(ARGV[1]) < last then return 0 end
redis.call('HSET', KEYS[1], 'epoch', ARGV[1], 'by', ARGV[2])
redis.call('PEXPIRE', KEYS[1], 60000)
return 1`)

// A replica is one process that can run the job.
type replica struct {
	name     string
	client   *redis.Client
	election *fairlock.Election
}

// singleton runs a job on exactly one of three replicas at a time,
// with failover: the replicas campaign in an Election, the leader runs the
// job, and a replica that goes away hands over to the next in line.
//
// Replica a leads first and resigns (a deploy): b leads at once. Then b's
// process loses Redis (a crash, a partition): b learns its term is over
// before c is elected, a lease TTL later. Every run of the job is stamped
// with its leader's epoch, and the job's store refuses an epoch older than
// the last it saw. An observer, which never campaigns, follows the
// leaders.
//
//	go run ./examples singleton
func singleton(ctx context.Context, w io.Writer, rdb *exampleredis.Redis) error {
	fmt.Fprintln(w, "using", rdb)
	const jobKey = "example-singleton:job"
	opts := []fairlock.Option{
		fairlock.WithKeyPrefix("example-singleton"),
		// A short lease, so that c takes over from b fast, but not so
		// short that a machine slow enough to delay a renewal that long
		// loses a candidate's session (its waiters live by it too); a
		// longer waiter TTL, for the same reason.
		fairlock.WithLeaseTTL(time.Second),
		fairlock.WithWaiterTTL(2 * time.Second),
	}
	var replicas []*replica
	for _, name := range []string{"a", "b", "c"} {
		client := rdb.NewClient()
		locker, err := fairlock.New(client, opts...)
		if err != nil {
			return err
		}
		defer locker.Close()
		election, err := locker.Election("nightly-report")
		if err != nil {
			return err
		}
		replicas = append(replicas, &replica{name: name, client: client, election: election})
	}
	observed := observe(ctx, rdb, opts)
	defer func() { fmt.Fprintln(w, "observer saw leaders:", <-observed) }()

	a, b, c := replicas[0], replicas[1], replicas[2]
	aTerm, err := a.election.Campaign(ctx, "replica a")
	if err != nil {
		return err
	}
	// b, then c, wait their turn: candidates lead in the order they came.
	bElected, cElected := queueCampaign(ctx, b), queueCampaign(ctx, c)
	runs := func(t *fairlock.Term, by string) error {
		ok, err := runJob.Run(ctx, rdb.Client, []string{jobKey}, t.Epoch(), by).Int()
		if err == nil && ok == 0 {
			err = fmt.Errorf("%s's run was refused", by)
		}
		return err
	}
	if err := runs(aTerm, "a"); err != nil {
		return err
	}
	fmt.Fprintln(w, "a: leading, ran the job")
	// A deploy: a resigns, and b leads at once.
	if err := aTerm.Resign(ctx); err != nil {
		return err
	}
	bTerm, err := (<-bElected)()
	if err != nil {
		return fmt.Errorf("b was not elected: %w", err)
	}
	if err := runs(bTerm, "b"); err != nil {
		return err
	}
	fmt.Fprintln(w, "b: leading after a resigned, ran the job")
	// b's process loses Redis. Its term ends on its own clock, before
	// anyone else can lead; c is elected when b's lease runs out.
	b.client.Close()
	<-bTerm.Done()
	fmt.Fprintln(w, "b: lost Redis; its term is over:", bTerm.Err())
	cTerm, err := (<-cElected)()
	if err != nil {
		return fmt.Errorf("c was not elected: %w", err)
	}
	if err := runs(cTerm, "c"); err != nil {
		return err
	}
	fmt.Fprintln(w, "c: leading after b's lease ran out, ran the job")
	// Had b kept running the job, its epoch would be refused now.
	if ok, _ := runJob.Run(ctx, rdb.Client, []string{jobKey}, bTerm.Epoch(), "b").Int(); ok == 0 {
		fmt.Fprintln(w, "b: a late run with its old epoch is refused")
	}
	return cTerm.Resign(ctx)
}

// queueCampaign starts r's campaign and returns once it is queued behind
// the leader; the campaign's result arrives on the channel.
func queueCampaign(ctx context.Context, r *replica) <-chan func() (*fairlock.Term, error) {
	elected, queued := make(chan func() (*fairlock.Term, error), 1), make(chan struct{})
	var queuedTimes atomic.Int64
	go func() {
		// OnQueued reports each time the candidate queues: again if it
		// lost its place (a renewal later than its session's TTL).
		t, err := r.election.Campaign(ctx, "replica "+r.name, fairlock.OnQueued(func(int) {
			if queuedTimes.Add(1) == 1 {
				close(queued)
			}
		}))
		if err != nil {
			err = fmt.Errorf("queued %d times: %w", queuedTimes.Load(), err)
		}
		elected <- func() (*fairlock.Term, error) { return t, err }
	}()
	select {
	case <-queued:
	case <-ctx.Done():
	}
	return elected
}

// observe follows the leaders from a Locker of its own until the first
// three have been seen, and then sends their values.
func observe(ctx context.Context, rdb *exampleredis.Redis, opts []fairlock.Option) <-chan []string {
	out := make(chan []string, 1)
	locker, err := fairlock.New(rdb.NewClient(), opts...)
	if err != nil {
		out <- nil
		return out
	}
	election, _ := locker.Election("nightly-report")
	ctx, cancel := context.WithCancel(ctx)
	leaders := election.Observe(ctx)
	go func() {
		defer locker.Close()
		defer cancel()
		var seen []string
		for ld := range leaders {
			if seen = append(seen, ld.Value); len(seen) == 3 {
				break
			}
		}
		cancel()
		for range leaders {
		}
		out <- seen
	}()
	return out
}
