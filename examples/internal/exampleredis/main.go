package exampleredis

import (
	"context"
	"io"
	"log"
	"os"
	"os/signal"
	"time"
)

// Run is the body of an example: it does its work on rdb and writes what it
// has to say to w. Main runs it as a command; the example's test runs it
// the same way and checks what it wrote.
type Run func(ctx context.Context, w io.Writer, rdb *Redis) error

// Timeout bounds an example started by Main, so that one that got stuck
// exits with an error instead of hanging.
const Timeout = 30 * time.Second

// Main is an example's main function: it opens Redis (see Open), runs run
// with its output on stdout, closes Redis, and exits with the error if run
// returns one. run's context ends after Timeout or on interrupt (Ctrl-C).
func Main(run Run) { exitOnError(runMain(Timeout, run)) }

// MainUntilInterrupt is Main without the Timeout, for an example that keeps
// serving until it is interrupted.
func MainUntilInterrupt(run Run) { exitOnError(runMain(0, run)) }

func runMain(timeout time.Duration, run Run) error {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	// Once ctx has ended, a second Ctrl-C kills the program as usual.
	context.AfterFunc(ctx, stop)
	if timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, timeout)
		defer cancel()
	}
	rdb, err := Open(ctx)
	if err != nil {
		return err
	}
	defer rdb.Close()
	return run(ctx, os.Stdout, rdb)
}

func exitOnError(err error) {
	if err != nil {
		log.Fatal(err)
	}
}
