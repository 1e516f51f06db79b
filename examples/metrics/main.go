// Command metrics exports fairlock's observer events as Prometheus metrics,
// written by hand in the text exposition format, so the library itself
// needs no metrics dependency. The same Observe function could feed
// OpenTelemetry, expvar or any other sink instead.
//
// By default it runs a small workload and prints the metrics once. With
// -listen it then keeps serving them at /metrics until interrupted:
//
//	go run ./examples/metrics
//	go run ./examples/metrics -listen localhost:9090
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"sync"
	"time"

	"github.com/fairlock/fairlock/examples/internal/exampleredis"
	"github.com/fairlock/fairlock/fairlock"
)

func main() {
	listen := flag.String("listen", "", "serve /metrics at this address after the workload")
	flag.Parse()
	exampleredis.MainUntilInterrupt(func(ctx context.Context, w io.Writer, rdb *exampleredis.Redis) error {
		return run(ctx, w, rdb, *listen)
	})
}

const lockName = "reports"

// run is the example; exampleredis.MainUntilInterrupt opens rdb and passes
// it in. The first line is a comment, to keep the output valid exposition.
func run(ctx context.Context, w io.Writer, rdb *exampleredis.Redis, listen string) error {
	fmt.Fprintln(w, "#", rdb)

	metrics := NewMetrics()
	locker, err := fairlock.New(rdb.Client,
		fairlock.WithKeyPrefix("example-metrics"),
		fairlock.WithObserver(metrics.Observe))
	if err != nil {
		return err
	}
	defer locker.Close()

	// Workload: three goroutines take turns on one lock, five times each.
	var wg sync.WaitGroup
	errs := make(chan error, 3)
	for range 3 {
		wg.Go(func() {
			for range 5 {
				if err := locker.Do(ctx, lockName, func(context.Context) error {
					time.Sleep(2 * time.Millisecond)
					return nil
				}); err != nil {
					errs <- err
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	if err := <-errs; err != nil {
		return err
	}

	gauges := Gauges{Locker: locker, Locks: []string{lockName}}
	if _, err := metrics.WriteTo(w); err != nil {
		return err
	}
	if err := gauges.Write(ctx, w); err != nil {
		return err
	}
	if listen == "" {
		return nil
	}

	srv := &http.Server{Addr: listen, Handler: Handler(metrics, gauges), ReadHeaderTimeout: 5 * time.Second}
	go func() {
		<-ctx.Done()
		srv.Close()
	}()
	fmt.Fprintf(w, "# serving http://%s/metrics, interrupt to stop\n", listen)
	if err := srv.ListenAndServe(); !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}
