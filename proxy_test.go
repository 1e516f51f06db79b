package fairlock_test

// A small loopback TCP proxy for the slow-network scenarios: it can add
// latency to each direction, cut every connection, and refuse new ones.

import (
	"io"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

type Proxy struct {
	Addr     string
	target   string
	ln       net.Listener
	up, down atomic.Int64 // added latency in ns: client->server, server->client
	refuse   atomic.Bool
	mu       sync.Mutex
	conns    map[net.Conn]struct{}
	wg       sync.WaitGroup
}

func startProxy(t testing.TB, target string) *Proxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &Proxy{Addr: ln.Addr().String(), target: target, ln: ln, conns: map[net.Conn]struct{}{}}
	p.wg.Add(1)
	go p.accept()
	t.Cleanup(p.Close)
	return p
}

// SetLatency delays bytes client->server by up and server->client by down.
func (p *Proxy) SetLatency(up, down time.Duration) {
	p.up.Store(int64(up))
	p.down.Store(int64(down))
}

// Refuse makes the proxy close new connections at once (on) or serve them.
func (p *Proxy) Refuse(on bool) { p.refuse.Store(on) }

// Cut closes every open connection.
func (p *Proxy) Cut() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	n := len(p.conns)
	for c := range p.conns {
		c.Close()
	}
	return n
}

func (p *Proxy) Close() {
	p.ln.Close()
	p.Cut()
	p.wg.Wait()
}

func (p *Proxy) track(c net.Conn) {
	p.mu.Lock()
	p.conns[c] = struct{}{}
	p.mu.Unlock()
}

func (p *Proxy) untrack(c net.Conn) {
	p.mu.Lock()
	delete(p.conns, c)
	p.mu.Unlock()
}

func (p *Proxy) accept() {
	defer p.wg.Done()
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		if p.refuse.Load() {
			c.Close()
			continue
		}
		s, err := net.DialTimeout("tcp", p.target, time.Second)
		if err != nil {
			c.Close()
			continue
		}
		p.track(c)
		p.track(s)
		p.wg.Add(2)
		go p.pipe(c, s, &p.up)
		go p.pipe(s, c, &p.down)
	}
}

type chunk struct {
	b  []byte
	at time.Time
}

// pipe copies src to dst, holding each chunk until its arrival time plus the
// current latency. Closing either side closes both.
func (p *Proxy) pipe(src, dst net.Conn, lat *atomic.Int64) {
	defer p.wg.Done()
	q := make(chan chunk, 1024)
	done := make(chan struct{})
	go func() {
		defer close(done)
		for c := range q {
			if d := time.Until(c.at); d > 0 {
				time.Sleep(d)
			}
			if _, err := dst.Write(c.b); err != nil {
				break
			}
		}
		src.Close()
		dst.Close()
		for range q { //nolint:revive // drain
		}
	}()
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			q <- chunk{b: append([]byte(nil), buf[:n]...), at: time.Now().Add(time.Duration(lat.Load()))}
		}
		if err != nil {
			if err != io.EOF {
				dst.Close()
			}
			break
		}
	}
	close(q)
	<-done
	src.Close()
	dst.Close()
	p.untrack(src)
	p.untrack(dst)
}
