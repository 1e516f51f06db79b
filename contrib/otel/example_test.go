package fairlockotel_test

import (
	"context"
	"fmt"
	"log"

	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	fairlockotel "github.com/fairlock/fairlock/contrib/otel"
	"github.com/fairlock/fairlock/fairlock"
	"github.com/fairlock/fairlock/fairlock/fairlocktest"
	"github.com/redis/go-redis/v9"
)

// Wire the adapter into a Locker, take the lock three times, and read the
// grant counter back. A real program installs an exporter's reader (for
// example go.opentelemetry.io/otel/exporters/prometheus) instead of the
// ManualReader, or sets the global MeterProvider and calls New with no
// option.
func Example() {
	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	defer mp.Shutdown(context.Background())

	metrics, err := fairlockotel.New(fairlockotel.WithMeterProvider(mp))
	if err != nil {
		log.Fatal(err)
	}
	srv, err := fairlocktest.StartServer() // an embedded miniredis, for the example
	if err != nil {
		log.Fatal(err)
	}
	defer srv.Close()
	locker, err := srv.NewLocker(metrics.Option())
	if err != nil {
		log.Fatal(err)
	}

	ctx := context.Background()
	for range 3 {
		if err := locker.Do(ctx, "reports", func(context.Context) error { return nil }); err != nil {
			log.Fatal(err)
		}
	}

	var rm metricdata.ResourceMetrics
	if err := reader.Collect(ctx, &rm); err != nil {
		log.Fatal(err)
	}
	for _, m := range rm.ScopeMetrics[0].Metrics {
		switch data := m.Data.(type) {
		case metricdata.Sum[int64]:
			if m.Name == "fairlock.lease.grants" {
				fmt.Println(m.Name, data.DataPoints[0].Value)
			}
		case metricdata.Histogram[float64]:
			for _, p := range data.DataPoints {
				outcome, _ := p.Attributes.Value(fairlockotel.OutcomeKey)
				end, _ := p.Attributes.Value(fairlockotel.LeaseEndKey)
				fmt.Println(m.Name, outcome.AsString()+end.AsString(), p.Count)
			}
		}
	}
	// Unordered output:
	// fairlock.acquire.wait granted 3
	// fairlock.lease.hold released 3
	// fairlock.lease.grants 3
}

// Give the lock-name attribute only to a few known locks, and none to the
// unbounded per-account ones.
func ExampleWithLockName() {
	known := map[string]bool{"reports": true, "billing": true}
	metrics, err := fairlockotel.New(fairlockotel.WithLockName(func(name string) string {
		if known[name] {
			return name
		}
		return "" // no attribute: account:42 and the like share one series
	}))
	if err != nil {
		log.Fatal(err)
	}
	rdb := redis.NewClient(&redis.Options{Addr: "localhost:6379"})
	defer rdb.Close()
	locker, err := fairlock.New(rdb, metrics.Option())
	if err != nil {
		log.Fatal(err)
	}
	defer locker.Close()
}
