package fairlockotel_test

import (
	"context"
	"net"
	"os/exec"
	"strconv"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"go.opentelemetry.io/otel/metric/noop"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"

	fairlockotel "github.com/fairlock/fairlock/contrib/otel"
	"github.com/fairlock/fairlock/fairlock"
)

// BenchmarkObserve is the adapter's cost per grant: one op is the
// EventGranted and EventReleased of an uncontended lease, and, for
// "queued", the EventEnqueued before them. "sdk" records into the
// OpenTelemetry SDK (a ManualReader, never collected); "noop" into the
// API's no-op provider, which is the adapter alone. Run with
//
//	go test -run '^$' -bench Observe -benchmem ./contrib/otel/
func BenchmarkObserve(b *testing.B) {
	queued := []fairlock.Event{
		{Kind: fairlock.EventEnqueued, Name: "bench", Position: 1},
		{Kind: fairlock.EventGranted, Name: "bench", Wait: 3 * time.Millisecond, Queued: true},
		{Kind: fairlock.EventReleased, Name: "bench", Held: time.Millisecond},
	}
	uncontended := []fairlock.Event{
		{Kind: fairlock.EventGranted, Name: "bench", Wait: 200 * time.Microsecond},
		{Kind: fairlock.EventReleased, Name: "bench", Held: time.Millisecond},
	}
	sdk := func(b *testing.B) fairlockotel.Option {
		mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(sdkmetric.NewManualReader()))
		b.Cleanup(func() { mp.Shutdown(context.Background()) })
		return fairlockotel.WithMeterProvider(mp)
	}
	for _, bc := range []struct {
		name   string
		events []fairlock.Event
		opts   func(b *testing.B) []fairlockotel.Option
	}{
		{"noop", uncontended, func(*testing.B) []fairlockotel.Option {
			return []fairlockotel.Option{fairlockotel.WithMeterProvider(noop.NewMeterProvider())}
		}},
		{"sdk", uncontended, func(b *testing.B) []fairlockotel.Option { return []fairlockotel.Option{sdk(b)} }},
		{"sdk/queued", queued, func(b *testing.B) []fairlockotel.Option { return []fairlockotel.Option{sdk(b)} }},
		{"sdk/lockname", uncontended, func(b *testing.B) []fairlockotel.Option {
			return []fairlockotel.Option{sdk(b), fairlockotel.WithLockName(func(n string) string { return n })}
		}},
	} {
		b.Run(bc.name, func(b *testing.B) {
			m, err := fairlockotel.New(bc.opts(b)...)
			if err != nil {
				b.Fatal(err)
			}
			b.ReportAllocs()
			for b.Loop() {
				for _, e := range bc.events {
					m.Observe(e)
				}
			}
		})
	}
}

// BenchmarkAcquireRelease is an uncontended Acquire and Release, two round
// trips to a redis-server of its own, without an observer and with the
// adapter on the SDK: the difference is the adapter's share of a grant.
// It is skipped when redis-server is not installed.
func BenchmarkAcquireRelease(b *testing.B) {
	rdb := startRedis(b)
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(sdkmetric.NewManualReader()))
	b.Cleanup(func() { mp.Shutdown(context.Background()) })
	m, err := fairlockotel.New(fairlockotel.WithMeterProvider(mp))
	if err != nil {
		b.Fatal(err)
	}
	for _, bc := range []struct {
		name string
		opts []fairlock.Option
	}{
		{"observer=off", nil},
		{"observer=fairlockotel", []fairlock.Option{m.Option()}},
	} {
		b.Run(bc.name, func(b *testing.B) {
			l, err := fairlock.New(rdb, bc.opts...)
			if err != nil {
				b.Fatal(err)
			}
			defer l.Close()
			ctx := context.Background()
			b.ReportAllocs()
			for b.Loop() {
				s, err := l.Acquire(ctx, "bench")
				if err != nil {
					b.Fatal(err)
				}
				if err := s.Release(ctx); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// startRedis runs a throwaway redis-server on a free loopback port. The
// core module's internal/redistest does the same, but a nested module
// cannot import another module's internal packages.
func startRedis(b *testing.B) *redis.Client {
	b.Helper()
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		b.Skip("redis-server not installed")
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	port := ln.Addr().(*net.TCPAddr).Port
	ln.Close()
	cmd := exec.Command(bin, "--port", strconv.Itoa(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no")
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() {
		cmd.Process.Kill()
		cmd.Wait()
	})
	rdb := redis.NewClient(&redis.Options{Addr: "127.0.0.1:" + strconv.Itoa(port)})
	b.Cleanup(func() { rdb.Close() })
	for deadline := time.Now().Add(5 * time.Second); rdb.Ping(context.Background()).Err() != nil; {
		if time.Now().After(deadline) {
			b.Fatal("redis-server did not start")
		}
		time.Sleep(10 * time.Millisecond)
	}
	return rdb
}
