package main

// serve: the operator page of package fairlockhttp, on its own HTTP
// server, for any Redis the command reaches. It only reads, as inspect and
// list do, unless -force-release.

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"net"
	"net/http"
	"time"

	"github.com/fairlock/fairlock/fairlock"
	"github.com/fairlock/fairlock/fairlock/fairlockhttp"
)

func serveFlags(fs *flag.FlagSet) func(context.Context, *session, string) error {
	addr := fs.String("addr", "localhost:8080", "listen on `ADDR` (host:port; :8080 for every interface)")
	force := fs.Bool("force-release", false, "let the page end a holder's lease, after a confirmation (the Redis user needs the writing ACL rule)")
	refresh := fs.Duration("refresh", fairlockhttp.DefaultRefresh,
		fmt.Sprintf("how often the page reads the locks again (%v to %v)", fairlockhttp.MinRefresh, fairlockhttp.MaxRefresh))
	return func(ctx context.Context, s *session, _ string) error {
		l, err := serveLocker(ctx, s)
		if err != nil {
			return err
		}
		opts := []fairlockhttp.Option{fairlockhttp.WithRefresh(*refresh)}
		mode := "read-only"
		if *force {
			opts = append(opts, fairlockhttp.WithForceRelease())
			mode = "force release on"
		}
		ln, err := net.Listen("tcp", *addr)
		if err != nil {
			return err
		}
		srv := &http.Server{Handler: fairlockhttp.New(l, opts...), ReadHeaderTimeout: 10 * time.Second}
		fmt.Fprintf(s.stdout, "fairlock serve: the locks of %s on http://%s/ (%s); interrupt to stop\n", s.addr, browsable(ln.Addr()), mode)
		ctx, cancel := context.WithCancel(ctx) // ends the goroutine below if Serve fails
		defer cancel()
		stopped := make(chan struct{})
		go func() {
			defer close(stopped)
			<-ctx.Done()
			shut, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			srv.Shutdown(shut) //nolint:errcheck // past the bound, the process exits anyway
		}()
		err = srv.Serve(ln)
		if errors.Is(err, http.ErrServerClosed) {
			<-stopped
			return nil
		}
		return err
	}
}

// serveLocker connects as the other commands do, but a Redis that does
// not answer yet is no reason to serve nothing: the page says it is down
// until it answers. Without -cluster the server could not be asked
// whether it runs Redis Cluster, so it is taken for a single server, and
// the line printed says so.
func serveLocker(ctx context.Context, s *session) (*fairlock.Locker, error) {
	l, err := s.locker(ctx)
	var op *net.OpError
	if err == nil || s.cluster != nil || !errors.As(err, &op) {
		return l, err
	}
	fmt.Fprintf(s.stdout, "fairlock serve: %s; taken for a single server (pass -cluster if it runs Redis Cluster)\n", explain(err, s.addr))
	single := false
	s.cluster = &single
	return s.locker(ctx)
}

// browsable is the address a browser on this machine opens: localhost for
// a server that listens on every interface.
func browsable(a net.Addr) string {
	tcp, ok := a.(*net.TCPAddr)
	if !ok || !tcp.IP.IsUnspecified() {
		return a.String()
	}
	return fmt.Sprintf("localhost:%d", tcp.Port)
}
