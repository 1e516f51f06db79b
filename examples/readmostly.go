package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/fairlock/fairlock/examples/internal/contention"
	"github.com/fairlock/fairlock/examples/internal/exampleredis"
	"github.com/fairlock/fairlock/fairlock"
)

const (
	readmostlyPrefix = "example-readmostly"
	readers          = 8
	updates          = 3                      // updates the writer wants to make
	writeEach        = 100 * time.Millisecond // the writer wants to update the config this often
	// The writer gives up an update after waiting this many heartbeats of
	// its Locker (1s with the default TTLs). fairlock's writer waits only
	// for the readers holding the lock, 2-4ms each, and for the hand-off:
	// 37-49ms in the test under -race, 46-104ms with both cores of a
	// 2-core machine busy besides, and at most a heartbeat more if the
	// grant's message is lost. The second heartbeat is the margin for a
	// machine slower still: CI, under -race beside other tests and a busy
	// core, once saw a wait past a second.
	patienceBeats = 2
	config        = readmostlyPrefix + ":config" // the config: its version and its body, two keys
)

// readmostly shows a read-mostly config guarded by fairlock's
// RWMutex: readers keep coming, and a writer still gets in within a few
// readers' time, because readers who arrive after it wait for it. For
// contrast, the same load on a read-write lock without a queue, where a
// reader gets in whenever no writer holds the lock: the readers seldom all
// let go at once, and the writer mostly does not get in at all.
//
// The readers and the writer are goroutines with Lockers of their own, as
// separate processes would have.
//
//	go run ./examples readmostly
func readmostly(ctx context.Context, w io.Writer, rdb *exampleredis.Redis) error {
	fmt.Fprintln(w, "using", rdb)
	lockers, err := contention.NewLockers(rdb, 4, fairlock.WithKeyPrefix(readmostlyPrefix))
	if err != nil {
		return err
	}
	defer lockers.Close()

	patience := patienceBeats * lockers[0].Heartbeat()
	fair, err := readMostly(ctx, rdb, patience, func(i int) rwLock {
		m, err := lockers[i%len(lockers)].RWMutex("config")
		if err != nil {
			panic(err) // the name is a constant
		}
		return fairRW{m}
	})
	if err != nil {
		return err
	}
	spin, err := readMostly(ctx, rdb, patience, func(int) rwLock {
		return spinRWLock{rdb: rdb.Client, key: readmostlyPrefix + ":spin", ttl: time.Second, retry: spinRetry}
	})
	if err != nil {
		return err
	}

	fmt.Fprintf(w, "%d readers read the config over and over, each read holding the lock 2-4ms;\n"+
		"a writer wants to update it every %v, %d times, and gives up an update after waiting %v.\n"+
		"The lock without a queue retries every %v:\n",
		readers, writeEach, updates, patience, spinRetry)
	table := contention.Table{-10, -9, -23, -14, -13}
	table.Row(w, "", "updates", "writer's longest wait", "reads served", "most readers", "torn reads")
	for _, r := range []struct {
		name string
		res  result
	}{{"fairlock", fair}, {"no queue", spin}} {
		wait := r.res.writerWait.Round(time.Millisecond).String()
		if r.res.gaveUp {
			wait += " (never got in)"
		}
		table.Row(w, r.name, fmt.Sprintf("%d of %d", r.res.updates, r.res.wanted), wait,
			r.res.readers.Total(), r.res.readers.Most, r.res.torn)
	}
	if fair.updates != fair.wanted {
		return fmt.Errorf("fairlock: the writer made %d of %d updates", fair.updates, fair.wanted)
	}
	if fair.torn+spin.torn != 0 {
		return fmt.Errorf("a reader saw a config half written: %d with fairlock, %d without a queue", fair.torn, spin.torn)
	}
	for i, n := range fair.readers.Grants() {
		if n == 0 {
			return fmt.Errorf("fairlock: reader %d was never served", i)
		}
	}
	return nil
}

// rwLock is what readMostly needs of a read-write lock: take it shared or
// alone, get the way to give it back.
type rwLock interface {
	rlock(ctx context.Context) (unlock func(context.Context) error, err error)
	lock(ctx context.Context) (unlock func(context.Context) error, err error)
}

type fairRW struct{ m *fairlock.RWMutex }

func (f fairRW) rlock(ctx context.Context) (func(context.Context) error, error) {
	return leaseRelease(f.m.RLock(ctx))
}

func (f fairRW) lock(ctx context.Context) (func(context.Context) error, error) {
	return leaseRelease(f.m.Lock(ctx))
}

func leaseRelease(lease *fairlock.Lease, err error) (func(context.Context) error, error) {
	if err != nil {
		return nil, err
	}
	return lease.Release, nil
}

type result struct {
	wanted, updates int           // updates the writer wanted to make, and made
	writerWait      time.Duration // its longest wait, or how long it waited before it gave up
	gaveUp          bool          // the writer gave up an update
	readers         contention.Result
	torn            int64 // reads that saw a version without its body
}

// readMostly runs a writer that, every writeEach, takes the lock alone and
// writes a new version in two steps; and readers that take the lock shared,
// read the config, hold the lock a little and want it again at once, until
// the writer has made its updates or given up and every reader has read,
// which ctx bounds. A reader that saw the two steps apart would count a
// torn read.
func readMostly(ctx context.Context, rdb *exampleredis.Redis, patience time.Duration, newLock func(reader int) rwLock) (result, error) {
	if err := writeConfig(ctx, rdb, 0); err != nil {
		return result{}, err
	}
	var torn atomic.Int64
	reading := contention.Start(ctx, readers)
	for i := range readers {
		l := newLock(i)
		reading.Go(contention.Worker{
			Slot: i,
			Acquire: func(ctx context.Context, _ func()) (func(context.Context) error, error) {
				return l.rlock(ctx)
			},
			Held: func(ctx context.Context) error { return read(ctx, rdb, &torn) },
			Hold: 2*time.Millisecond + time.Duration(i)*time.Millisecond/4, // 2-4ms, so readers come and go at different times
		})
	}
	res, err := update(ctx, rdb, patience, newLock(readers))
	// Readers read on until every one of them has read.
	var readErr error
	res.readers, readErr = reading.Finish()
	res.torn = torn.Load()
	return res, errors.Join(err, readErr)
}

// update is the writer: every writeEach it takes the lock alone and writes
// a new version, until it has made its updates or given up one, having
// waited patience.
func update(ctx context.Context, rdb *exampleredis.Redis, patience time.Duration, writer rwLock) (result, error) {
	res := result{wanted: updates}
	start := time.Now()
	for version := 1; version <= updates; version++ {
		select {
		case <-time.After(time.Until(start.Add(time.Duration(version) * writeEach))):
		case <-ctx.Done():
			return res, nil
		}
		asked := time.Now()
		waitCtx, cancel := context.WithTimeout(ctx, patience)
		unlock, err := writer.lock(waitCtx)
		cancel()
		res.writerWait = max(res.writerWait, time.Since(asked))
		if err != nil {
			res.gaveUp = errors.Is(err, context.DeadlineExceeded) && ctx.Err() == nil
			if res.gaveUp {
				return res, nil
			}
			return res, err
		}
		if err := errors.Join(writeConfig(ctx, rdb, version), unlock(context.WithoutCancel(ctx))); err != nil {
			return res, err
		}
		res.updates++
	}
	return res, nil
}

// read is a reader's read of the config; it counts a torn read, a version
// without its body.
func read(ctx context.Context, rdb *exampleredis.Redis, torn *atomic.Int64) error {
	v, err := rdb.Client.MGet(ctx, config+":version", config+":body").Result()
	if err == nil && v[1] != "v"+fmt.Sprint(v[0]) {
		torn.Add(1)
	}
	return err
}

// write updates the config in two steps, the version and then its body,
// with a pause between them: a reader in that pause would see them apart.
func writeConfig(ctx context.Context, rdb *exampleredis.Redis, version int) error {
	if err := rdb.Client.Set(ctx, config+":version", version, time.Minute).Err(); err != nil {
		return err
	}
	time.Sleep(time.Millisecond)
	return rdb.Client.Set(ctx, config+":body", "v"+strconv.Itoa(version), time.Minute).Err()
}
