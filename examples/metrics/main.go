// Command metrics exports fairlock's metrics the way a production service
// would: the fairlockotel adapter turns the Locker's events into
// OpenTelemetry instruments, the OpenTelemetry SDK aggregates them, and its
// Prometheus exporter serves them on /metrics through promhttp. Nothing
// here writes the exposition format by hand.
//
// It runs a short contended workload so that the instruments have values,
// then serves them until interrupted. With -stdout it prints them once with
// the SDK's stdout exporter instead, for those who run no Prometheus:
//
//	go -C examples/metrics run .               # serve http://localhost:9464/metrics
//	go -C examples/metrics run . -addr :9090
//	go -C examples/metrics run . -stdout       # print them as JSON, then exit
//
// This example is a module of its own (see go.mod), so that neither the
// library nor its other examples depend on the SDK or on Prometheus; -C
// runs the commands above from the repository root.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	otelprom "go.opentelemetry.io/otel/exporters/prometheus"
	"go.opentelemetry.io/otel/exporters/stdout/stdoutmetric"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"

	fairlockotel "github.com/fairlock/fairlock/contrib/otel"
	"github.com/fairlock/fairlock/examples/internal/exampleredis"
	"github.com/fairlock/fairlock/fairlock"
)

func main() {
	addr := flag.String("addr", "localhost:9464", "serve /metrics at this address")
	stdout := flag.Bool("stdout", false, "print the metrics once with the OpenTelemetry stdout exporter instead of serving them")
	flag.Parse()
	if *stdout {
		exampleredis.Main(runStdout)
		return
	}
	exampleredis.MainUntilInterrupt(func(ctx context.Context, w io.Writer, rdb *exampleredis.Redis) error {
		return run(ctx, w, rdb, *addr)
	})
}

const lockName = "reports"

// The workload: one caller gives up after a short timeout while the lock is
// held, so that the wait histogram has a second outcome; then workers take
// turns on the lock, rounds times each.
const (
	workers = 3
	rounds  = 5
	grants  = 1 + workers*rounds
)

// run is the Prometheus example; exampleredis.MainUntilInterrupt opens rdb
// and passes it in. It serves until ctx ends.
func run(ctx context.Context, w io.Writer, rdb *exampleredis.Redis, addr string) error {
	fmt.Fprintln(w, rdb)

	// The exporter is a reader of the SDK's MeterProvider and registers its
	// collector with a Prometheus registry; promhttp serves that registry.
	registry := prometheus.NewRegistry()
	exporter, err := otelprom.New(otelprom.WithRegisterer(registry))
	if err != nil {
		return err
	}
	provider := sdkmetric.NewMeterProvider(sdkmetric.WithReader(exporter))
	defer provider.Shutdown(context.WithoutCancel(ctx))

	if err := workload(ctx, rdb, provider); err != nil {
		return err
	}

	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return err
	}
	srv := &http.Server{
		Handler:           promhttp.HandlerFor(registry, promhttp.HandlerOpts{}),
		ReadHeaderTimeout: 5 * time.Second,
	}
	stop := context.AfterFunc(ctx, func() { srv.Close() })
	defer stop()
	fmt.Fprintf(w, "%d grants made; serving http://%s/metrics, interrupt to stop\n", grants, ln.Addr())
	if err := srv.Serve(ln); !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}

// runStdout is the same workload with the stdout exporter: the provider's
// Shutdown flushes one last export, which prints every instrument as JSON.
func runStdout(ctx context.Context, w io.Writer, rdb *exampleredis.Redis) error {
	fmt.Fprintln(w, rdb)
	exporter, err := stdoutmetric.New(stdoutmetric.WithWriter(w), stdoutmetric.WithPrettyPrint())
	if err != nil {
		return err
	}
	// The periodic reader's interval is long: the one export that matters
	// is the one Shutdown makes after the workload.
	provider := sdkmetric.NewMeterProvider(sdkmetric.WithReader(
		sdkmetric.NewPeriodicReader(exporter, sdkmetric.WithInterval(time.Hour))))
	err = workload(ctx, rdb, provider)
	return errors.Join(err, provider.Shutdown(context.WithoutCancel(ctx)))
}

// workload makes a Locker that reports to provider through fairlockotel and
// runs the workload on it.
func workload(ctx context.Context, rdb *exampleredis.Redis, provider *sdkmetric.MeterProvider) error {
	metrics, err := fairlockotel.New(
		fairlockotel.WithMeterProvider(provider),
		// This example's one lock has a fixed name, so it may be an
		// attribute. Unbounded names (one per account) would map to "".
		fairlockotel.WithLockName(func(name string) string {
			if name == lockName {
				return name
			}
			return ""
		}),
	)
	if err != nil {
		return err
	}
	locker, err := fairlock.New(rdb.Client, fairlock.WithKeyPrefix("example-metrics"), metrics.Option())
	if err != nil {
		return err
	}
	defer locker.Close()

	// One caller gives up while the lock is held: outcome timed_out.
	if err := locker.Do(ctx, lockName, func(ctx context.Context) error {
		impatient, cancel := context.WithTimeout(ctx, 20*time.Millisecond)
		defer cancel()
		if _, err := locker.Acquire(impatient, lockName); !errors.Is(err, context.DeadlineExceeded) {
			return fmt.Errorf("impatient Acquire: %v, want a timeout", err)
		}
		return nil
	}); err != nil {
		return err
	}

	var wg sync.WaitGroup
	errs := make(chan error, workers)
	for range workers {
		wg.Go(func() {
			for range rounds {
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
	return <-errs
}
