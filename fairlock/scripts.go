package fairlock

import (
	"context"
	"strings"
	"time"

	"github.com/fairlock/fairlock/scripts"
	"github.com/redis/go-redis/v9"
)

// A scriptSet is the queue engine's scripts on one holder store.
type scriptSet = scripts.Engine[*luaScript]

func newScriptSet(s scripts.Set) *scriptSet {
	set := scripts.Map(s, newScript)
	return &set
}

var (
	// releaseFast is the mutex's uncontended release (Lease.release),
	// acquireFast the fast path (fastpath.go), renew a session's renewal
	// (session.go).
	releaseFast = newScript(scripts.ReleaseFast)
	acquireFast = newScript(scripts.AcquireFast)
	renew       = newScript(scripts.Renew)
	// proclaimScript and leaderScript are an election's (election.go).
	proclaimScript = newScript(scripts.Proclaim)
	leaderScript   = newScript(scripts.Leader)
	// mutexScripts keep the holder in one string key.
	mutexScripts = newScriptSet(scripts.Mutex)
	// countedScripts keep the holders of a semaphore or read-write lock in
	// a sorted set, with the permits they hold counted.
	countedScripts = newScriptSet(scripts.Counted)
)

// A luaScript is one script of package scripts. It runs with EVALSHA and,
// when Redis does not have it (after SCRIPT FLUSH or a restart), EVAL.
type luaScript struct {
	*redis.Script     // for pipelines, which cannot fall back by themselves
	sha, src      any // boxed once: a call allocates only its own arguments
}

func newScript(src string) *luaScript {
	s := redis.NewScript(src)
	return &luaScript{Script: s, sha: s.Hash(), src: src}
}

// head is how a command starts that runs s in a pipeline: EVALSHA and its
// digest, or with source EVAL and its text, which no SCRIPT FLUSH can fail.
func (s *luaScript) head(source bool) (cmd, script any) {
	if source {
		return "eval", s.src
	}
	return "evalsha", s.sha
}

// How a script call runs.
type runMode int

const (
	// retried: go-redis may send it again after a lost reply: a second
	// run answers as the first did, and one that comes late changes
	// nothing the first did not.
	retried runMode = iota
	// once: never sent twice by go-redis. A request that brings a token
	// (acquire.lua, the fast path) must not: a first copy held in the
	// network could reach Redis after a retry was answered and its grant
	// released, and take the lock for a token nobody holds; its caller
	// asks recover.lua instead. A release repeated after a lost reply would
	// find nothing to release and report the lease lost; its caller
	// retries knowing it.
	once
	// readOnly: EVALSHA_RO, which a read-only ACL rule allows.
	readOnly
)

// A caller is a client or a connection.
type caller interface {
	Process(ctx context.Context, cmd redis.Cmder) error
}

// onceCmd is a command go-redis does not send again after an error that
// may have come after Redis ran it.
type onceCmd struct{ *redis.Cmd }

func (onceCmd) NoRetry() bool { return true }

// retryPause is how long a call waits before it sends again a command
// that Redis refused with TRYAGAIN: during a slot migration, a command
// whose keys are split between the two nodes is refused, not run, until
// the rest of its keys have moved, which takes a MIGRATE or two.
const retryPause = 5 * time.Millisecond

// run sends the script with args, made by lockRef.call, on c. TRYAGAIN
// means Redis did not run it, so it is sent again, whatever the mode,
// until ctx ends.
func (s *luaScript) run(ctx context.Context, c caller, args []any, mode runMode) *redis.Cmd {
	for {
		cmd := s.runOnce(ctx, c, args, mode)
		if !redis.IsTryAgainError(cmd.Err()) || sleep(ctx, retryPause) != nil {
			return cmd
		}
	}
}

// sleep waits d, or until ctx ends, and then returns its error.
func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (s *luaScript) runOnce(ctx context.Context, c caller, args []any, mode runMode) *redis.Cmd {
	args[0], args[1] = "evalsha", s.sha
	if mode == readOnly {
		args[0] = "evalsha_ro"
	}
	cmd := s.send(ctx, c, args, mode)
	if err := cmd.Err(); err != nil && redis.HasErrorPrefix(err, "NOSCRIPT") {
		args[0], args[1] = "eval", s.src
		if mode == readOnly {
			args[0] = "eval_ro"
		}
		cmd = s.send(ctx, c, args, mode)
	}
	if err := cmd.Err(); mode == readOnly && err != nil && strings.Contains(err.Error(), "not allowed in read-only scripts") {
		// miniredis (so fairlocktest) counts TIME as a write; Redis does not.
		return s.runOnce(ctx, c, args, retried)
	}
	return cmd
}

func (s *luaScript) send(ctx context.Context, c caller, args []any, mode runMode) *redis.Cmd {
	cmd := redis.NewCmd(ctx, args...)
	if mode == once {
		c.Process(ctx, onceCmd{cmd}) //nolint:errcheck // the error is cmd's
	} else {
		c.Process(ctx, cmd) //nolint:errcheck // the error is cmd's
	}
	return cmd
}

// Modes of acquire.lua, boxed once: never queue, queue, or queue and count
// the position (paid only when someone listens for it).
var (
	modeTry   any = "try"
	modeWait  any = "wait"
	modeCount any = "count"
	// modeFast asks recover.lua about the fast path's request.
	modeFast any = "fast"
)

// Flags and empty values as script arguments, boxed once, so that a call
// without metadata allocates nothing for it and its scripts run no command
// for it.
var (
	noArg  any = ""
	yesArg any = "1"
)

func flag(on bool) any {
	if on {
		return yesArg
	}
	return noArg
}

func metaValue(metadata string) any {
	if metadata == "" {
		return noArg
	}
	return metadata
}

// notifyRefused tells whether err is Redis refusing a script's PUBLISH or
// SPUBLISH for want of the channel in the user's ACL rule. Redis 7.0 says
// "can't publish to the channel", later versions "no permissions to access
// the ... channel"; keys and commands refused never name a channel.
func notifyRefused(err error) bool {
	msg := err.Error()
	return strings.Contains(msg, "channel") && (strings.Contains(msg, "publish") || strings.Contains(msg, "permissions"))
}
