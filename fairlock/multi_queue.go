package fairlock

import (
	"context"
	"errors"
	"time"

	"github.com/fairlock/fairlock/scripts"
	"github.com/redis/go-redis/v9"
)

// A MultiMutex request queued in several mutexes' queues at once: all of
// them on one node, one slot's on Cluster (MultiMutex.requests).
//
// Its requests to the mutexes go in one MULTI/EXEC, so no other request
// comes between them: any two such requests stand in the same order in
// every queue they share (no priorities, which could order them one way
// in one queue and the other way in another), and a single request never
// waits for a second lock while it holds one. So no cycle of waits can
// form, and the request waits in all its queues at once: its wait is the
// longest of its queues' FIFO bounds, not their sum. It may be granted one
// mutex before another, and holds it meanwhile, as the order of the queues
// says it should.
//
// On Cluster a request may hold the mutexes of earlier slots while it
// waits in a later one, never those of a later slot: in a cycle of waits,
// each holder would wait in a slot no earlier than the one before it, so
// all would wait in one slot, where the argument above rules the cycle
// out. Taking a slot's mutexes one by one instead would let a request
// hold one of them while it waits for another of that slot, behind a
// request queued in both at once that holds that other: a deadlock.
//
// A part that loses its place (its grant expired unclaimed, its session
// lost) would queue again behind requests that came after it, in that
// queue only, and the order of the queues would no longer agree: the whole
// request gives back what it holds, leaves every queue, and queues again.

// errRequeue means a part of a multi-request lost its place: the request
// gave everything back and queues again, as often as that happens (as
// Acquire does). A request that did not reach Redis (errWithdrawn) or
// found its session gone (errSessionGone) queues again too, at most
// sessionRetries times in one call (as Acquire).
var errRequeue = errors.New("fairlock: multi-request queues again")

// requeues tells whether err is one of the failures after which a
// multi-request queues again.
func requeues(err error) bool {
	return err == errRequeue || err == errSessionGone || err == errWithdrawn
}

// acquireTogether queues one request in the queues of mutexes, which
// share a node, and returns their leases once it is granted all.
func acquireTogether(ctx context.Context, mutexes []*Mutex, opts []AcquireOption) ([]*Lease, error) {
	l := mutexes[0].locker
	start := time.Now()
	parts := make([]*attempt, len(mutexes))
	for i, mu := range mutexes {
		parts[i] = &attempt{l: l, req: mu.req, wait: true, mode: tryRequest, start: start}
		if err := parts[i].configure(opts); err != nil {
			return nil, err
		}
	}
	if err := l.enterAcquire(ctx, mutexes[0].Name()); err != nil {
		return nil, err
	}
	defer l.calls.Done()
	for lost := 0; ; {
		leases, err := queueTogether(ctx, parts)
		switch {
		case !requeues(err):
			return leases, err
		case err == errRequeue:
		case lost == sessionRetries:
			return nil, failed("acquire", mutexes[0].Name(), err)
		default:
			lost++
		}
	}
}

// queueTogether sends every part's request in one transaction and waits
// for every grant.
func queueTogether(ctx context.Context, parts []*attempt) ([]*Lease, error) {
	l := parts[0].l
	ws := make([]*waiter, len(parts))
	opens := make([][]any, len(parts))
	for i, a := range parts {
		ws[i], opens[i] = l.books.newWaiter(a.req, &a.cfg, l.cfg.lane(0), l.id, a.start)
		if err := a.subscribe(ctx, ws[i]); err != nil {
			for _, w := range ws[:i] {
				l.books.drop(w)
			}
			return nil, err
		}
		l.books.listen(ws[i])
	}
	replies, errs, sent := sendTogether(ctx, parts, ws, opens)
	held := make([]*Lease, len(parts))
	queued, failure := readTogether(ctx, parts, ws, opens, sent, replies, errs, held)
	if failure == nil {
		failure = awaitTogether(ctx, parts, ws, queued, held)
	} else {
		for _, i := range queued {
			l.leave(ws[i], failure, false)
		}
	}
	if failure != nil {
		giveBack(ctx, l, held)
		return nil, failure
	}
	return held, nil
}

// readTogether reads the parts' answers (sendTogether's): it puts the
// grants in held and returns the parts that queued, and the first failure.
func readTogether(ctx context.Context, parts []*attempt, ws []*waiter, opens [][]any, sent time.Time, replies []int64, errs []error, held []*Lease) (queued []int, failure error) {
	l := parts[0].l
	for i, a := range parts {
		if errs[i] == errWithdrawn {
			l.books.withdrawn(ws[i], opens[i])
			failure = cmpFailure(failure, errWithdrawn)
			continue
		}
		if errs[i] != nil && !isRedisError(errs[i]) {
			// Not even recover.lua could be asked: withdrawn in the
			// background.
			failure = cmpFailure(failure, a.fail(ws[i], ctxError(ctx, failed("acquire", ws[i].ref.name, errs[i])), true))
			continue
		}
		reply, err := a.enqueued(ws[i], opens[i], sent, replies[i], errs[i])
		switch {
		case err == errSessionGone:
			failure = cmpFailure(failure, err)
		case err != nil:
			failure = cmpFailure(failure, ctxError(ctx, failed("acquire", ws[i].ref.name, err)))
		case reply > 0:
			lease, err := l.grant(ctx, ws[i], reply, false, false)
			if err == ErrPlaceLost {
				err = errSessionGone // its session ended as it was granted, as in attempt.run
			}
			held[i], failure = lease, cmpFailure(failure, err)
		default:
			a.req.ref.markBusy(l.cfg.heartbeat())
			a.queued(ws[i], int(-reply))
			queued = append(queued, i)
		}
	}
	return queued, failure
}

// sendTogether sends the parts' acquire.lua requests in one MULTI/EXEC,
// at sent, and returns each one's reply or error. A request whose answer
// was lost is asked about with recover.lua, for every part in one
// transaction too, so that all of them learn the same: they all ran, or
// none did and all are withdrawn now (errWithdrawn).
func sendTogether(ctx context.Context, parts []*attempt, ws []*waiter, opens [][]any) (replies []int64, errs []error, sent time.Time) {
	l := parts[0].l
	acquire := parts[0].req.ref.kind.scripts.Acquire
	cmds := make([]*redis.Cmd, len(parts))
	exec := func(source bool) {
		sent = time.Now()
		pipe := l.client.TxPipeline()
		for i, a := range parts {
			l.books.sentAt(ws[i], sent)
			args := a.acquireArgs(ws[i], opens[i])
			args[0], args[1] = acquire.head(source)
			cmds[i] = redis.NewCmd(ctx, args...)
			pipe.Process(ctx, onceCmd{cmds[i]}) //nolint:errcheck // each command's own error is read below
		}
		execTx(ctx, pipe, cmds)
	}
	exec(false)
	// One script for all: none ran. Sent again with its text, which no
	// SCRIPT FLUSH meanwhile can fail.
	if redis.HasErrorPrefix(cmds[0].Err(), "NOSCRIPT") {
		exec(true)
	}
	replies, errs = make([]int64, len(parts)), make([]error, len(parts))
	for i, cmd := range cmds {
		replies[i], errs[i] = cmd.Int64()
	}
	if err := errs[0]; err == nil || isRedisError(err) {
		return replies, errs, sent
	}
	recoverTogether(ctx, parts, ws, replies, errs)
	return replies, errs, sent
}

// execTx runs the transaction pipe of cmds. An error of the transaction
// itself (EXECABORT, a lost connection) becomes the error of every command
// it left without one, so that none reads as an answer; an error that is
// one command's own came from an EXEC that ran the others.
func execTx(ctx context.Context, pipe redis.Pipeliner, cmds []*redis.Cmd) {
	_, err := pipe.Exec(ctx)
	if err == nil {
		return
	}
	for _, cmd := range cmds {
		if cmd.Err() == err {
			return
		}
	}
	for _, cmd := range cmds {
		if cmd.Err() == nil {
			cmd.SetErr(err)
		}
	}
}

// recoverTogether asks recover.lua about every part, in one transaction,
// into replies and errs: errWithdrawn for a request that had not run.
func recoverTogether(ctx context.Context, parts []*attempt, ws []*waiter, replies []int64, errs []error) {
	l := parts[0].l
	recoverScript := parts[0].req.ref.kind.scripts.Recover
	tickets := make([]countTicket, len(parts))
	cmds := make([]*redis.Cmd, len(parts))
	pipe := l.client.TxPipeline()
	for i, a := range parts {
		tickets[i] = ws[i].session.count.ticket(l.books.isOpen(ws[i].session))
		args := ws[i].ref.call(ws[i].tokenArg, a.mode.arg(), l.refs.leaseMs)
		args[0], args[1] = "eval", recoverScript.src
		cmds[i] = redis.NewCmd(ctx, args...)
		pipe.Process(ctx, cmds[i]) //nolint:errcheck // each command's own error is read below
	}
	execTx(ctx, pipe, cmds)
	for i, cmd := range cmds {
		reply, err := cmd.Int64()
		switch {
		case err == nil && reply == 0:
			ws[i].session.count.add(tickets[i]) // recover.lua counts a withdrawal
			errs[i] = errWithdrawn
		case err == nil, redis.HasErrorPrefix(err, scripts.ErrSessionGone):
			replies[i], errs[i] = reply, err
		}
	}
}

// awaitTogether waits for the grants of the queued parts into held. The
// first to fail ends the others' waits: it returns that failure, errRequeue
// if a part lost its place, or ctx's error.
func awaitTogether(ctx context.Context, parts []*attempt, ws []*waiter, queued []int, held []*Lease) error {
	wctx, stop := context.WithCancel(ctx)
	defer stop()
	type result struct {
		i     int
		lease *Lease
		err   error
	}
	results := make(chan result, len(queued))
	for _, i := range queued {
		go func() {
			lease, err := parts[i].await(wctx, ws[i])
			results <- result{i, lease, err}
		}()
	}
	var failure error
	for range queued {
		r := <-results
		held[r.i] = r.lease
		switch {
		case r.err == errGrantExpired || r.err == ErrPlaceLost:
			failure = cmpFailure(failure, errRequeue)
		case r.err != nil && wctx.Err() != nil && ctx.Err() == nil:
			// Ended by stop, for another part's failure.
		case r.err != nil:
			failure = cmpFailure(failure, r.err)
		}
		if failure != nil {
			stop()
		}
	}
	return failure
}

// cmpFailure keeps the failure a multi-request ends with: the first error
// after which it does not queue again, or else the first of those after
// which it does (requeues).
func cmpFailure(kept, err error) error {
	if err != nil && (kept == nil || requeues(kept) && !requeues(err)) {
		return err
	}
	return kept
}

// giveBack releases the leases a failed multi-request was granted, with a
// context of its own, so that an ended ctx cannot keep a mutex from
// passing on.
func giveBack(ctx context.Context, l *Locker, held []*Lease) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), l.cfg.leaseTTL)
	defer cancel()
	for _, lease := range held {
		if lease != nil {
			lease.Release(ctx) //nolint:errcheck // the Locker retries a release Redis did not answer
		}
	}
}
