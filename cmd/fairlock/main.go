// Command fairlock shows and clears fairlock locks on a Redis or a Redis
// Cluster: who holds a lock, who waits behind it, and, when a holder is
// stuck, ends its lease.
//
//	fairlock [-redis URL] [-prefix P] [-cluster] COMMAND [flags] [NAME]
//
// Run fairlock -h for the commands.
package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/fairlock/fairlock/fairlock"
	"github.com/redis/go-redis/v9"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	os.Exit(run(ctx, os.Args[1:], os.Stdin, os.Stdout, os.Stderr))
}

// Exit codes.
const (
	exitOK    = 0
	exitError = 1
	exitUsage = 2
)

// A command is one subcommand: its flags are parsed from args, and NAME,
// when it takes one, is the one argument left.
type command struct {
	usage    string // the arguments, for -h
	summary  string
	takeName bool
	define   func(fs *flag.FlagSet) func(ctx context.Context, s *session, name string) error // declares the flags, returns the action
}

var commands = map[string]command{
	"inspect": {"[-json] NAME", "holder, fence, lease left and the waiters in queue order, with their metadata; and the counts of the semaphore and read-write lock of that name, if in use", true, inspectFlags},
	"list":    {"", "the names of the locks that have a holder or waiters, semaphores and read-write locks marked", false, listFlags},
	"watch":   {"[-every 1s] [-count N] NAME", "inspect again every interval, marking grants and new waiters, until interrupted", true, watchFlags},
	"release": {"-force [-yes] NAME", "end the current lease, whoever holds it; the next waiter gets the lock", true, releaseFlags},
}

// order is how -h lists the commands.
var order = []string{"inspect", "list", "watch", "release"}

// session is what a command works with. The connection is opened by the
// command's first call of locker, after it checked its flags.
type session struct {
	url, prefix string
	cluster     *bool // nil: ask the server
	stdin       *bufio.Reader
	stdout      io.Writer
	tty         bool // stdout is a terminal: watch redraws in place

	client redis.UniversalClient
	lock   *fairlock.Locker
}

// locker connects to Redis, once.
func (s *session) locker(ctx context.Context) (*fairlock.Locker, error) {
	if s.lock != nil {
		return s.lock, nil
	}
	client, err := connect(ctx, s.url, s.cluster)
	if err != nil {
		return nil, err
	}
	l, err := fairlock.New(client, fairlock.WithKeyPrefix(s.prefix))
	if err != nil {
		client.Close()
		return nil, err
	}
	s.client, s.lock = client, l
	return l, nil
}

// queue reads the lock called name.
func (s *session) queue(ctx context.Context, name string) (fairlock.QueueState, error) {
	l, err := s.locker(ctx)
	if err != nil {
		return fairlock.QueueState{}, err
	}
	return l.Queue(ctx, name)
}

// close disconnects, if connected.
func (s *session) close() {
	if s.lock != nil {
		s.lock.Close()
		s.client.Close()
	}
}

// errUsage marks an error in the command line: exit code 2.
var errUsage = errors.New("usage")

func run(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("fairlock", flag.ContinueOnError)
	fs.SetOutput(stderr)
	url := fs.String("redis", "", "Redis `URL`: redis://[user:password@]host:port[/db], rediss:// for TLS (default $REDIS_URL)")
	prefix := fs.String("prefix", fairlock.DefaultKeyPrefix, "key `prefix` of the Lockers to look at (WithKeyPrefix)")
	cluster := fs.Bool("cluster", false, "use a Redis Cluster client; when not given, the server is asked (INFO cluster)")
	fs.Usage = func() { usage(fs) }
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return exitOK
		}
		return exitUsage
	}
	if *url == "" {
		*url = os.Getenv("REDIS_URL") // not the flag's default: -h would print its password
	}
	if fs.NArg() == 0 {
		usage(fs)
		return exitUsage
	}
	cmd, ok := commands[fs.Arg(0)]
	if !ok {
		fmt.Fprintf(stderr, "fairlock: unknown command %q\n", fs.Arg(0))
		usage(fs)
		return exitUsage
	}
	sub := flag.NewFlagSet("fairlock "+fs.Arg(0), flag.ContinueOnError)
	sub.SetOutput(stderr)
	sub.Usage = func() {
		fmt.Fprintf(stderr, "usage: fairlock %s %s\n  %s\n", fs.Arg(0), cmd.usage, cmd.summary)
		sub.PrintDefaults()
	}
	do := cmd.define(sub)
	if err := sub.Parse(fs.Args()[1:]); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return exitOK
		}
		return exitUsage
	}
	name := ""
	switch {
	case cmd.takeName && sub.NArg() == 1:
		name = sub.Arg(0)
	case cmd.takeName || sub.NArg() != 0:
		sub.Usage()
		return exitUsage
	}
	var forceCluster *bool
	fs.Visit(func(f *flag.Flag) {
		if f.Name == "cluster" {
			forceCluster = cluster
		}
	})
	s := &session{url: *url, prefix: *prefix, cluster: forceCluster, stdin: bufio.NewReader(stdin), stdout: stdout}
	if f, ok := stdout.(*os.File); ok {
		if st, err := f.Stat(); err == nil && st.Mode()&os.ModeCharDevice != 0 {
			s.tty = true
		}
	}
	err := do(ctx, s, name)
	s.close()
	switch {
	case errors.Is(err, errUsage):
		fmt.Fprintf(stderr, "fairlock %s: %v\n", fs.Arg(0), err)
		sub.Usage()
		return exitUsage
	case err != nil:
		fmt.Fprintf(stderr, "fairlock %s: %v\n", fs.Arg(0), err)
		return exitError
	}
	return exitOK
}

func usage(fs *flag.FlagSet) {
	w := fs.Output()
	fmt.Fprintf(w, "usage: fairlock [flags] COMMAND [command flags] [NAME]\n\ncommands:\n")
	for _, name := range order {
		c := commands[name]
		fmt.Fprintf(w, "  %s\n      %s\n", strings.TrimSpace(name+" "+c.usage), c.summary)
	}
	fmt.Fprintf(w, "\nflags:\n")
	fs.PrintDefaults()
	fmt.Fprintf(w, "\nfairlock COMMAND -h describes a command's flags.\n")
}

// connect opens a client for url: a ClusterClient if cluster says so, or,
// when cluster is nil, if the server says it runs in cluster mode.
func connect(ctx context.Context, url string, cluster *bool) (redis.UniversalClient, error) {
	if url == "" {
		return nil, fmt.Errorf("%w: no Redis given: set REDIS_URL or -redis", errUsage)
	}
	opts, err := redis.ParseURL(url)
	if err != nil {
		return nil, fmt.Errorf("%w: -redis: %v", errUsage, err)
	}
	if cluster == nil {
		single := redis.NewClient(opts)
		info, err := single.Info(ctx, "cluster").Result()
		if err != nil {
			single.Close()
			return nil, fmt.Errorf("asking %s whether it runs Redis Cluster (INFO cluster): %w; pass -cluster or -cluster=false to skip the question", opts.Addr, err)
		}
		if !strings.Contains(info, "cluster_enabled:1") {
			return single, nil
		}
		single.Close()
	} else if !*cluster {
		return redis.NewClient(opts), nil
	}
	copts, err := redis.ParseClusterURL(url)
	if err != nil {
		return nil, fmt.Errorf("%w: -redis for a Redis Cluster: %v", errUsage, err)
	}
	return redis.NewClusterClient(copts), nil
}

func inspectFlags(fs *flag.FlagSet) func(context.Context, *session, string) error {
	asJSON := fs.Bool("json", false, "print one JSON object")
	return func(ctx context.Context, s *session, name string) error {
		q, err := s.queue(ctx, name)
		if err != nil {
			return err
		}
		sem, rw, err := s.kinds(ctx, name)
		if err != nil {
			return err
		}
		if *asJSON {
			out := toJSON(name, q)
			if sem != nil {
				out.Semaphore = &semaphoreJSON{Capacity: sem.Capacity, InUse: sem.InUse, Holders: sem.Holders, Waiters: sem.Waiters, Fence: sem.Fence}
			}
			if rw != nil {
				out.RWMutex = &rwJSON{Writer: rw.Writer, Readers: rw.Readers, Waiters: rw.Waiters, Fence: rw.Fence}
			}
			return json.NewEncoder(s.stdout).Encode(out)
		}
		printQueue(s.stdout, name, q)
		if sem != nil {
			fmt.Fprintf(s.stdout, "semaphore  %d of %d permits held by %d leases, %d waiting, last fence %d\n", sem.InUse, sem.Capacity, sem.Holders, sem.Waiters, sem.Fence)
		}
		if rw != nil {
			holders := fmt.Sprintf("%d readers", rw.Readers)
			if rw.Writer {
				holders = "a writer"
			}
			fmt.Fprintf(s.stdout, "rwmutex    held by %s, %d waiting, last fence %d\n", holders, rw.Waiters, rw.Fence)
		}
		return nil
	}
}

// kinds reads the semaphore and the read-write lock called name, each nil
// unless it has holders or waiters.
func (s *session) kinds(ctx context.Context, name string) (*fairlock.SemaphoreState, *fairlock.RWState, error) {
	l, err := s.locker(ctx)
	if err != nil {
		return nil, nil, err
	}
	// Any capacity reads it: Inspect reports the one in use.
	sem, err := l.Semaphore(name, 1)
	if err != nil {
		return nil, nil, err
	}
	ss, err := sem.Inspect(ctx)
	if err != nil {
		return nil, nil, err
	}
	rw, err := l.RWMutex(name)
	if err != nil {
		return nil, nil, err
	}
	rs, err := rw.Inspect(ctx)
	if err != nil {
		return nil, nil, err
	}
	var semOut *fairlock.SemaphoreState
	var rwOut *fairlock.RWState
	if ss.Holders > 0 || ss.Waiters > 0 {
		semOut = &ss
	}
	if rs.Writer || rs.Readers > 0 || rs.Waiters > 0 {
		rwOut = &rs
	}
	return semOut, rwOut, nil
}

// lockJSON is inspect -json's output. Metadata is "" for a holder or
// waiter that gave none (fairlock.WithMetadata).
type lockJSON struct {
	Name         string       `json:"name"`
	Held         bool         `json:"held"`
	Holder       string       `json:"holder"`
	Metadata     string       `json:"metadata"`
	Fence        int64        `json:"fence"`
	TTLMs        int64        `json:"ttl_ms"`
	WaitersTotal int          `json:"waiters_total"`
	Waiters      []waiterJSON `json:"waiters"`
	// The semaphore and the read-write lock of the same name, when they
	// have holders or waiters.
	Semaphore *semaphoreJSON `json:"semaphore,omitempty"`
	RWMutex   *rwJSON        `json:"rwmutex,omitempty"`
}

type semaphoreJSON struct {
	Capacity int   `json:"capacity"`
	InUse    int   `json:"in_use"`
	Holders  int   `json:"holders"`
	Waiters  int   `json:"waiters"`
	Fence    int64 `json:"fence"`
}

type rwJSON struct {
	Writer  bool  `json:"writer"`
	Readers int   `json:"readers"`
	Waiters int   `json:"waiters"`
	Fence   int64 `json:"fence"`
}

type waiterJSON struct {
	Token      string `json:"token"`
	Metadata   string `json:"metadata"`
	Position   int    `json:"position"`
	DeadlineMs int64  `json:"deadline_ms"`
}

func toJSON(name string, q fairlock.QueueState) lockJSON {
	out := lockJSON{Name: name, Held: q.Held, Holder: q.Holder, Metadata: q.Metadata, Fence: q.Fence, TTLMs: q.TTL.Milliseconds(),
		WaitersTotal: q.Waiters, Waiters: []waiterJSON{}}
	for _, w := range q.Queue {
		out.Waiters = append(out.Waiters, waiterJSON{Token: w.Token, Metadata: w.Metadata, Position: w.Position, DeadlineMs: w.Deadline.Milliseconds()})
	}
	return out
}

func printQueue(w io.Writer, name string, q fairlock.QueueState) {
	fmt.Fprintf(w, "lock     %s\n", display(name))
	if q.Held {
		fmt.Fprintf(w, "holder   %s%s\nfence    %d\nlease    %v left\n", q.Holder, quoteMeta(q.Metadata), q.Fence, q.TTL)
	} else {
		fmt.Fprintf(w, "holder   none (last fence %d)\n", q.Fence)
	}
	fmt.Fprintf(w, "waiters  %d\n", q.Waiters)
	for _, qw := range q.Queue {
		fmt.Fprintf(w, "  %4d  %s  deadline in %v%s\n", qw.Position, qw.Token, qw.Deadline, quoteMeta(qw.Metadata))
	}
	if more := q.Waiters - len(q.Queue); more > 0 {
		fmt.Fprintf(w, "  … and %d more\n", more)
	}
}

// quoteMeta shows metadata after a token, always quoted: it is any
// caller's bytes, and must not pass for output of ours on a terminal.
func quoteMeta(meta string) string {
	if meta == "" {
		return ""
	}
	return "  " + strconv.Quote(meta)
}

// display shows a lock name as it is when that is unambiguous on a
// terminal, and quoted when it has spaces or unprintable bytes.
func display(name string) string {
	for _, r := range name {
		if r == utf8.RuneError || unicode.IsSpace(r) || !unicode.IsPrint(r) || r == '"' {
			return strconv.Quote(name)
		}
	}
	return name
}

func listFlags(*flag.FlagSet) func(context.Context, *session, string) error {
	return func(ctx context.Context, s *session, _ string) error {
		l, err := s.locker(ctx)
		if err != nil {
			return err
		}
		locks, err := l.Locks(ctx)
		if err != nil {
			return err
		}
		for _, lk := range locks {
			if lk.Kind == fairlock.LockMutex {
				fmt.Fprintln(s.stdout, display(lk.Name))
			} else {
				fmt.Fprintf(s.stdout, "%s  (%s)\n", display(lk.Name), lk.Kind)
			}
		}
		return nil
	}
}

func watchFlags(fs *flag.FlagSet) func(context.Context, *session, string) error {
	every := fs.Duration("every", time.Second, "how often to read the lock")
	count := fs.Int("count", 0, "stop after this many readings (0: until interrupted)")
	return func(ctx context.Context, s *session, name string) error {
		if *every <= 0 {
			return fmt.Errorf("%w: -every must be positive", errUsage)
		}
		t := time.NewTicker(*every)
		defer t.Stop()
		var prev *fairlock.QueueState
		for n := 1; ; n++ {
			q, err := s.queue(ctx, name)
			if ctx.Err() != nil {
				return nil // interrupted: the normal end of a watch
			}
			if err != nil {
				return err
			}
			if s.tty {
				fmt.Fprint(s.stdout, "\x1b[H\x1b[2J")
			}
			fmt.Fprintf(s.stdout, "--- %s\n", time.Now().Format("15:04:05.000"))
			printQueue(s.stdout, name, q)
			for _, m := range changes(prev, q) {
				fmt.Fprintln(s.stdout, m)
			}
			prev = &q
			if n == *count {
				return nil
			}
			select {
			case <-ctx.Done():
				return nil
			case <-t.C:
			}
		}
	}
}

// changes says what happened between two readings of a lock.
func changes(prev *fairlock.QueueState, q fairlock.QueueState) []string {
	if prev == nil {
		return nil
	}
	var out []string
	switch {
	case q.Held && (q.Holder != prev.Holder || q.Fence != prev.Fence):
		out = append(out, fmt.Sprintf("* granted to %s%s (fence %d)", q.Holder, quoteMeta(q.Metadata), q.Fence))
	case !q.Held && prev.Held:
		out = append(out, fmt.Sprintf("* %s ended, lock free", prev.Holder))
	}
	seen := make(map[string]bool, len(prev.Queue))
	for _, w := range prev.Queue {
		seen[w.Token] = true
	}
	for _, w := range q.Queue {
		if !seen[w.Token] {
			out = append(out, fmt.Sprintf("+ %s%s queued at position %d", w.Token, quoteMeta(w.Metadata), w.Position))
		}
	}
	return out
}

func releaseFlags(fs *flag.FlagSet) func(context.Context, *session, string) error {
	force := fs.Bool("force", false, "required: end a lease that another process holds")
	yes := fs.Bool("yes", false, "do not ask for confirmation")
	return func(ctx context.Context, s *session, name string) error {
		if !*force {
			return fmt.Errorf("%w: release ends a lease another process holds, which then keeps running until its next heartbeat; pass -force to do it", errUsage)
		}
		q, err := s.queue(ctx, name)
		if err != nil {
			return err
		}
		if !q.Held {
			return fmt.Errorf("lock %s is not held: nothing to release", display(name))
		}
		next := "nobody waits: the lock will be free"
		if len(q.Queue) > 0 {
			next = "the lock passes to " + q.Queue[0].Token + quoteMeta(q.Queue[0].Metadata)
		}
		fmt.Fprintf(s.stdout, "holder %s%s (fence %d, %v left)\n%s\n", q.Holder, quoteMeta(q.Metadata), q.Fence, q.TTL, next)
		if !*yes {
			fmt.Fprintf(s.stdout, "The holder is not stopped: it believes it holds the lock until its next heartbeat,\n"+
				"and only storage that checks fences is protected. End this lease? [y/N] ")
			answer, err := s.stdin.ReadString('\n')
			if err != nil && !errors.Is(err, io.EOF) {
				return err
			}
			if a := strings.ToLower(strings.TrimSpace(answer)); a != "y" && a != "yes" {
				return errors.New("not confirmed: nothing changed")
			}
		}
		l, err := s.locker(ctx)
		if err != nil {
			return err
		}
		res, err := l.ForceRelease(ctx, name, q.Holder)
		if errors.Is(err, fairlock.ErrNotHeld) {
			return fmt.Errorf("%s no longer holds %s (released, expired or ended meanwhile): nothing changed", q.Holder, display(name))
		}
		if err != nil {
			return err
		}
		fmt.Fprintf(s.stdout, "ended    %s (fence %d)\n", res.Ended, q.Fence)
		if res.Holder == "" {
			fmt.Fprintln(s.stdout, "granted  nobody: the lock is free")
		} else {
			fmt.Fprintf(s.stdout, "granted  %s (fence %d)\n", res.Holder, res.Fence)
		}
		return nil
	}
}
