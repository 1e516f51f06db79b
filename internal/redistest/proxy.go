package redistest

// A small loopback TCP proxy for the network faults: it can add latency to
// each direction, cut every connection, refuse new ones, lose the reply to
// a command after Redis ran it, and rewrite replies.

import (
	"bytes"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// A Proxy stands between clients and one Redis, on a loopback port.
type Proxy struct {
	Addr      string
	target    string
	ln        net.Listener
	up, down  atomic.Int64 // added latency in ns: client->server, server->client
	refuse    atomic.Bool
	mu        sync.Mutex
	conns     map[net.Conn]struct{}
	dropTo    []byte                    // DropReplyTo's marker, nil when unarmed
	cutAfter  bool                      // PartitionAfterReplyTo: cut everything after the drop
	dropping  map[net.Conn]bool         // server sides whose next reply is lost
	droppedAt time.Time                 // when a reply was last lost
	rewrite   func(reply []byte) []byte // RewriteReplies
	wg        sync.WaitGroup
}

// StartProxy starts a proxy to target, closed when the test ends.
func StartProxy(t testing.TB, target string) *Proxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &Proxy{Addr: ln.Addr().String(), target: target, ln: ln, conns: map[net.Conn]struct{}{}, dropping: map[net.Conn]bool{}}
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

// DropReplyTo loses the reply to the next request whose bytes contain
// marker (a command name, a script's SHA1, a key): the request reaches
// Redis, which runs it, and the connection is closed before its reply gets
// back, as when a network fails at the wrong moment.
func (p *Proxy) DropReplyTo(marker string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.dropTo = []byte(marker)
}

// DroppedAt is when DropReplyTo or PartitionAfterReplyTo last lost a
// reply (the fault itself, which may come long after the call that armed
// it); zero if none did.
func (p *Proxy) DroppedAt() time.Time {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.droppedAt
}

// PartitionAfterReplyTo is DropReplyTo, then a partition: once the reply
// is lost, every connection is cut and new ones are refused, until
// Refuse(false).
func (p *Proxy) PartitionAfterReplyTo(marker string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.dropTo, p.cutAfter = []byte(marker), true
}

// RewriteReplies passes every chunk of the server's replies through fn (nil:
// none), which must keep RESP's lengths right.
func (p *Proxy) RewriteReplies(fn func(reply []byte) []byte) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.rewrite = fn
}

// Close stops the proxy and closes its connections.
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
		go p.pipe(c, s, &p.up, s)
		go p.pipe(s, c, &p.down, nil)
	}
}

type chunk struct {
	b  []byte
	at time.Time
}

// pipe copies src to dst, holding each chunk until its arrival time plus the
// current latency. Closing either side closes both. server is the server
// side when src is a client (requests), nil for replies.
func (p *Proxy) pipe(src, dst net.Conn, lat *atomic.Int64, server net.Conn) {
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
			b := append([]byte(nil), buf[:n]...)
			p.mu.Lock()
			drop, partition := false, false
			switch {
			case server != nil && p.dropTo != nil && bytes.Contains(b, p.dropTo):
				p.dropping[server], p.dropTo = true, nil
			case server == nil && p.dropping[src]:
				delete(p.dropping, src)
				drop, partition = true, p.cutAfter
				p.cutAfter, p.droppedAt = false, time.Now()
			case server == nil && p.rewrite != nil:
				b = p.rewrite(b)
			}
			p.mu.Unlock()
			if partition {
				p.refuse.Store(true)
				p.Cut()
			}
			if drop {
				src.Close()
				dst.Close()
				break
			}
			q <- chunk{b: b, at: time.Now().Add(time.Duration(lat.Load()))}
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
