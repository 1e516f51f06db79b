// Command fairlock shows and clears fairlock locks of every kind (mutex,
// semaphore, read-write lock, election) on a Redis or a Redis Cluster: who holds a
// lock, who waits behind it, and, when a holder is stuck, ends its lease.
//
//	fairlock [-redis URL] [-prefix P] [-cluster] COMMAND [flags] [NAME]
//
// Run fairlock -h for the commands. inspect, list, watch and serve
// (without -force-release) only read, and run under the read-only ACL
// rule of docs/operations.md.
package main

import (
	"bufio"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"os/signal"
	"strings"

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
	"inspect": {"[-kind K] [-json] NAME",
		"each kind of lock called NAME that is in use (" + kindNames(", ") + "): its holders with permits,\n" +
			"      fence, lease left, group (with its weight if not 1), priority (if above 0) and metadata, then its waiters\n" +
			"      in queue order", true, inspectFlags},
	"list": {"[-json]", "every lock in use, of every kind, with its holders and waiters counted", false, listFlags},
	"watch": {"[-kind K] [-every 1s] [-count N] NAME",
		"inspect again every interval, marking grants, ended leases and new waiters, until interrupted", true, watchFlags},
	"release": {"-force [-yes] [-kind K] [-token T | -all] NAME",
		"end a lease another process holds: the only holder, the one called T, or every holder (-all);\n" +
			"      the waiters that now fit are granted, and what was ended and granted is printed", true, releaseFlags},
	"serve": {"[-addr localhost:8080] [-refresh 1s] [-force-release]",
		"serve a page of every lock in use, its holders and waiters, updated live (read-only unless\n" +
			"      -force-release, which lets it end a holder's lease after a confirmation)", false, serveFlags},
}

// order is how -h lists the commands.
var order = []string{"inspect", "list", "watch", "release", "serve"}

// session is what a command works with. The connection is opened by the
// command's first call of locker, after it checked its flags.
type session struct {
	url, prefix string
	cluster     *bool // nil: ask the server
	stdin       *bufio.Reader
	stdout      io.Writer
	tty         bool   // stdout is a terminal: watch redraws in place
	stdinTTY    bool   // stdin is a terminal: it echoes the answer to release's question
	addr        string // the address in url, for errors

	client redis.UniversalClient
	lock   *fairlock.Locker
}

// locker connects to Redis, once.
func (s *session) locker(ctx context.Context) (*fairlock.Locker, error) {
	if s.lock != nil {
		return s.lock, nil
	}
	client, err := s.connect(ctx)
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

// close disconnects, if connected.
func (s *session) close() {
	if s.lock != nil {
		s.lock.Close()
		s.client.Close()
	}
}

// errUsage marks an error in the command line: exit code 2.
var errUsage = errors.New("usage")

// quiet is go-redis's logger in this command: the pool's lines (a failed
// dial, four times over) say again what the one error line says.
type quiet struct{}

func (quiet) Printf(context.Context, string, ...any) {}

func run(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	redis.SetLogger(quiet{})
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
		fmt.Fprintf(stderr, "usage: fairlock %s %s\n      %s\n", fs.Arg(0), cmd.usage, cmd.summary)
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
	s.tty, s.stdinTTY = isTerminal(stdout), isTerminal(stdin)
	err := do(ctx, s, name)
	s.close()
	switch {
	case errors.Is(err, errUsage):
		fmt.Fprintf(stderr, "fairlock %s: %s\n", fs.Arg(0), oneLine(err.Error()))
		sub.Usage()
		return exitUsage
	case err != nil:
		fmt.Fprintf(stderr, "fairlock %s: %s\n", fs.Arg(0), explain(err, s.addr))
		return exitError
	}
	return exitOK
}

// isTerminal tells whether f is a terminal.
func isTerminal(f any) bool {
	file, ok := f.(*os.File)
	if !ok {
		return false
	}
	st, err := file.Stat()
	return err == nil && st.Mode()&os.ModeCharDevice != 0
}

func usage(fs *flag.FlagSet) {
	w := fs.Output()
	fmt.Fprintf(w, "usage: fairlock [flags] COMMAND [command flags] [NAME]\n\n"+
		"A NAME may be used by a lock of each kind at once; they are independent,\n"+
		"and -kind %s picks one.\n\ncommands:\n", kindNames("|"))
	for _, name := range order {
		c := commands[name]
		fmt.Fprintf(w, "  %s\n      %s\n", strings.TrimSpace(name+" "+c.usage), c.summary)
	}
	fmt.Fprintf(w, "\nflags:\n")
	fs.PrintDefaults()
	fmt.Fprintf(w, "\nfairlock COMMAND -h describes a command's flags.\n")
}

// connect opens a client for s.url: a ClusterClient if s.cluster says so,
// or, when it is nil, if the server says it runs in cluster mode.
func (s *session) connect(ctx context.Context) (redis.UniversalClient, error) {
	if s.url == "" {
		return nil, fmt.Errorf("%w: no Redis given: set REDIS_URL or -redis", errUsage)
	}
	opts, err := redis.ParseURL(s.url)
	if err != nil {
		return nil, fmt.Errorf("%w: -redis: %v", errUsage, err)
	}
	s.addr = opts.Addr
	if s.cluster == nil {
		single := redis.NewClient(opts)
		info, err := single.Info(ctx, "cluster").Result()
		if err != nil {
			single.Close()
			return nil, clusterQuestion(opts.Addr, err)
		}
		if !strings.Contains(info, "cluster_enabled:1") {
			return single, nil
		}
		single.Close()
	} else if !*s.cluster {
		return redis.NewClient(opts), nil
	}
	copts, err := redis.ParseClusterURL(s.url)
	if err != nil {
		return nil, fmt.Errorf("%w: -redis for a Redis Cluster: %v", errUsage, err)
	}
	return redis.NewClusterClient(copts), nil
}

// clusterQuestion is the error of INFO cluster. Only a server that
// refuses the question itself (NOPERM: an ACL rule without +info; unknown
// command: a proxy or a managed Redis without INFO) is helped by
// -cluster, which skips it: an unreachable server, a wrong password or a
// cancelled call would fail the next command just the same, and the hint
// would mislead.
func clusterQuestion(addr string, err error) error {
	var rerr redis.Error
	if !errors.As(err, &rerr) {
		return err // the network's or the context's: explain says it
	}
	msg := strings.ToLower(rerr.Error())
	if strings.HasPrefix(msg, "noperm") || strings.Contains(msg, "unknown command") {
		return fmt.Errorf("asking %s whether it runs Redis Cluster (INFO cluster): %w; pass -cluster or -cluster=false to skip the question", addr, err)
	}
	return fmt.Errorf("redis at %s: %w", addr, err)
}

// explain makes err one short line for an operator: an unreachable Redis
// says so and why, without the client's layers, and fairlock's own errors
// lose their "fairlock: ", which the line already starts with.
func explain(err error, addr string) string {
	var op *net.OpError
	if errors.As(err, &op) {
		where := addr
		if op.Addr != nil {
			where = op.Addr.String()
		}
		cause := op.Err
		var serr *os.SyscallError
		if errors.As(cause, &serr) {
			cause = serr.Err
		}
		if op.Op == "dial" {
			return oneLine(fmt.Sprintf("cannot connect to Redis at %s: %v", where, cause))
		}
		return oneLine(fmt.Sprintf("connection to Redis at %s failed: %v", where, cause))
	}
	return oneLine(strings.TrimPrefix(err.Error(), "fairlock: "))
}

// oneLine joins the lines of a message (errors.Join's, a server's) with
// "; ".
func oneLine(msg string) string {
	var parts []string
	for _, line := range strings.Split(msg, "\n") {
		if line = strings.TrimSpace(line); line != "" {
			parts = append(parts, line)
		}
	}
	return strings.Join(parts, "; ")
}
