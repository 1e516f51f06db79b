package fairlock

import (
	"context"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
)

// A batcher carries the script calls of a Locker's goroutines to Redis in
// shared round trips. A call that finds no batch of its shard in flight is
// sent at once, alone; the calls made while one is in flight wait for it
// and go together in the next one. There is no timer: a lone caller waits
// for nobody, and many callers pay one write and one read, on each side,
// for all of them. That is most of what a short script costs Redis and
// the client, so a Locker serving many names at once costs less per cycle
// than a plain SET NX PX lock sending its commands one by one.
//
// On Cluster each primary has a line of its own: a batch waits only for
// its own shard. A call whose shard is unknown (the slot map not loaded)
// takes the line of no shard, whose batches pipeline splits by primary.
//
// Each call keeps its own fate. A reply lost or a connection cut fails
// every call of its batch, each as it would fail alone. A call whose
// context ends stops waiting and gets the context's error, as for a reply
// lost (its command may still run), and is not sent at all if its batch
// has not left yet. A command that must not be sent twice (onceCmd) makes
// go-redis send none of its batch again; the others fail with it and their
// callers do what they do after any error.
type batcher struct {
	client  redis.UniversalClient
	cluster *redis.ClusterClient // nil: one shard
	// drains counts the goroutines sending the batches that queued behind
	// a caller's, which Shutdown waits for (stop).
	drains sync.WaitGroup

	mu      sync.Mutex
	lines   map[*redis.Client]*batchLine // by primary; nil: one Redis, or shard unknown
	stopped bool                         // no drain starts: its leader sends the batches itself
}

// A batchLine is one shard's calls: those queued for its next batch, and
// whether one is in flight. The batcher's mu guards it.
type batchLine struct {
	queue   []*batchCall
	sending bool
}

// maxBatch bounds the calls of one batch, so that a burst of thousands of
// waiters queueing at once is sent in pipelines of a size Redis answers
// promptly, each read in one go by the client.
const maxBatch = 256

// A batchCall is one call riding a batch: its own copy of the caller's
// command, which nobody but the batch writes, and done, closed when the
// copy has its reply.
type batchCall struct {
	ctx  context.Context
	cmd  redis.Cmder // *redis.Cmd, or onceCmd around it
	val  *redis.Cmd
	done chan struct{}
}

func newBatcher(client redis.UniversalClient) *batcher {
	b := &batcher{client: client, lines: map[*redis.Client]*batchLine{}}
	b.cluster, _ = client.(*redis.ClusterClient)
	return b
}

// Process sends cmd, a script call (*redis.Cmd or onceCmd), in the next
// batch of its shard, and sets its reply or its error. Process leads the
// batch when none is in flight, and a caller that leads goes on to its own
// reply as soon as it has it: the calls that queued meanwhile are sent by
// a goroutine of their own.
func (b *batcher) Process(ctx context.Context, cmd redis.Cmder) error {
	var mine *redis.Cmd
	sendOnce := false
	switch c := cmd.(type) {
	case *redis.Cmd:
		mine = c
	case onceCmd:
		mine, sendOnce = c.Cmd, true
	default:
		return b.client.Process(ctx, cmd)
	}
	call := &batchCall{ctx: ctx, val: redis.NewCmd(ctx, mine.Args()...), done: make(chan struct{})}
	call.cmd = call.val
	if sendOnce {
		call.cmd = onceCmd{call.val}
	}
	line := b.lineOf(ctx, mine)
	b.mu.Lock()
	line.queue = append(line.queue, call)
	lead := !line.sending
	line.sending = true
	b.mu.Unlock()
	if lead && b.sendNext(line) {
		b.startDrain(line)
	}
	select {
	case <-call.done:
		mine.SetVal(call.val.Val())
		mine.SetErr(call.val.Err())
	case <-ctx.Done():
		mine.SetErr(ctx.Err())
	}
	return mine.Err()
}

// lineOf is the line of the shard cmd's first key is on. A script call's
// arguments are EVALSHA, the script, the number of keys, then its keys.
func (b *batcher) lineOf(ctx context.Context, cmd *redis.Cmd) *batchLine {
	var shard *redis.Client
	if args := cmd.Args(); b.cluster != nil && len(args) > 3 {
		if key, ok := args[3].(string); ok {
			shard, _ = b.cluster.MasterForKey(ctx, key)
		}
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	line := b.lines[shard]
	if line == nil {
		line = &batchLine{}
		b.lines[shard] = line
	}
	return line
}

// startDrain sends the batches queued on line behind its leader's from a
// goroutine of their own, or, once stop has begun waiting for those, from
// the leader's: a drain counted after stop's Wait began would race with it
// (a call made while the Locker shuts down, as a Release may be).
func (b *batcher) startDrain(line *batchLine) {
	b.mu.Lock()
	stopped := b.stopped
	if !stopped {
		b.drains.Add(1)
	}
	b.mu.Unlock()
	if stopped {
		for b.sendNext(line) {
		}
		return
	}
	go b.drain(line)
}

// stop waits for the drains under way; any later batches are sent by
// their leaders.
func (b *batcher) stop() {
	b.mu.Lock()
	b.stopped = true
	b.mu.Unlock()
	b.drains.Wait()
}

// drain sends line's batches until none is queued.
func (b *batcher) drain(line *batchLine) {
	defer b.drains.Done()
	for b.sendNext(line) {
	}
}

// sendNext sends the calls queued on line, at most maxBatch, less those
// whose callers stopped waiting, and reports whether more are queued: if
// not, the line's next call leads.
func (b *batcher) sendNext(line *batchLine) (more bool) {
	b.mu.Lock()
	n := min(len(line.queue), maxBatch)
	batch := line.queue[:n:n]
	line.queue = line.queue[n:]
	b.mu.Unlock()

	live := batch[:0:0]
	for _, c := range batch {
		if c.ctx.Err() != nil {
			close(c.done)
			continue
		}
		live = append(live, c)
	}
	switch len(live) {
	case 0:
	case 1:
		b.client.Process(live[0].ctx, live[0].cmd) //nolint:errcheck // the error is the command's
	default:
		ctx, cancel := batchContext(live)
		cmds := make([]redis.Cmder, len(live))
		for i, c := range live {
			cmds[i] = c.cmd
		}
		pipeline(ctx, b.client, cmds) //nolint:errcheck // each command has its own error
		cancel()
	}
	for _, c := range live {
		close(c.done)
	}

	b.mu.Lock()
	defer b.mu.Unlock()
	if len(line.queue) == 0 {
		line.queue = nil
		line.sending = false
	}
	return line.sending
}

// batchContext is the context a batch is sent under: no caller's
// cancellation ends it (the others still wait for their replies), and it
// lasts until the last of its callers' deadlines, or, if one has none,
// as long as the client's own timeouts let it.
func batchContext(batch []*batchCall) (context.Context, context.CancelFunc) {
	ctx := context.WithoutCancel(batch[0].ctx)
	var last time.Time
	for _, c := range batch {
		d, ok := c.ctx.Deadline()
		if !ok {
			return context.WithCancel(ctx)
		}
		if d.After(last) {
			last = d
		}
	}
	return context.WithDeadline(ctx, last)
}
