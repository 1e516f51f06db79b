package redistest

// A small loopback TCP proxy for the network faults: it can add latency to
// each direction, cut every connection or one, refuse new ones, lose the
// reply to a command after Redis ran it, hold one request or reply while
// the other connections flow, send a request to Redis a second time, and
// rewrite replies.

import (
	"bytes"
	"io"
	"net"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// A Proxy stands between clients and one Redis, on a loopback port.
type Proxy struct {
	Addr      string
	target    atomic.Pointer[string] // where new connections go (Retarget)
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
	holds     []*armed                  // HoldRequest, HoldReply, Duplicate: armed, not yet caught
	replyHold map[net.Conn]*Hold        // server sides whose next reply is held
	caught    []*Hold                   // every hold caught, released by Close
	wg        sync.WaitGroup
}

// A Hold is one message kept in the network until Release: a request (and
// whatever follows it on its connection, as TCP keeps order), a reply, or
// the copy of a request.
type Hold struct {
	caught, gate chan struct{}
	release      sync.Once
}

func newHold() *Hold { return &Hold{caught: make(chan struct{}), gate: make(chan struct{})} }

// Caught is closed once the message was seen and is being held.
func (h *Hold) Caught() <-chan struct{} { return h.caught }

// Release lets the message go on. It is idempotent.
func (h *Hold) Release() { h.release.Do(func() { close(h.gate) }) }

// holdKind says what an armed hold catches.
type holdKind int

const (
	holdRequest holdKind = iota
	holdReply
	duplicate
)

type armed struct {
	kind    holdKind
	markers [][]byte // it catches a request that contains any
	hold    *Hold
}

// StartProxy starts a proxy to target, closed when the test ends.
func StartProxy(t testing.TB, target string) *Proxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &Proxy{Addr: ln.Addr().String(), ln: ln, conns: map[net.Conn]struct{}{}, dropping: map[net.Conn]bool{},
		replyHold: map[net.Conn]*Hold{}}
	p.target.Store(&target)
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

// Retarget sends new connections to target from now on, and cuts the open
// ones, as a failover that moves a service's address to a promoted
// replica does.
func (p *Proxy) Retarget(target string) {
	p.target.Store(&target)
	p.Cut()
}

// Refuse makes the proxy close new connections at once (on) or serve them.
func (p *Proxy) Refuse(on bool) { p.refuse.Store(on) }

// HoldRequest holds the next request whose bytes contain marker until
// Release, and with it whatever the client sends after it on that
// connection; the other connections flow. Redis gets the request when it is
// released, even if the client gave up and closed its side meanwhile, as a
// network that delivers late does.
func (p *Proxy) HoldRequest(marker string) *Hold { return p.arm(holdRequest, marker) }

// HoldReply lets the next request whose bytes contain marker reach Redis,
// and holds Redis's next reply on that connection until Release.
func (p *Proxy) HoldReply(marker string) *Hold { return p.arm(holdReply, marker) }

// Duplicate lets the next request whose bytes contain one of markers (or
// begin with it, for a marker that starts with "^") through, and sends
// Redis a copy of it on a connection of its own when the Hold is released;
// the copy's reply is dropped. So a command reaches Redis twice, the second
// time late, as go-redis's retry of a command whose reply was lost would
// send it. Of a pipeline, only the commands that contain a marker are
// copied: go-redis retries a pipeline whole or not at all, and not at all
// when one of its commands must not be sent twice, so a copy of the whole
// would send Redis what no client sends.
func (p *Proxy) Duplicate(markers ...string) *Hold { return p.arm(duplicate, markers...) }

func (p *Proxy) arm(kind holdKind, markers ...string) *Hold {
	h := newHold()
	a := &armed{kind: kind, hold: h}
	for _, m := range markers {
		a.markers = append(a.markers, []byte(m))
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.holds = append(p.holds, a)
	return h
}

// catch returns the armed hold that request b sets off, if any. p.mu is
// held.
func (p *Proxy) catch(b []byte) *armed {
	for i, a := range p.holds {
		if slices.ContainsFunc(a.markers, func(m []byte) bool { return matches(b, m) }) {
			p.holds = append(p.holds[:i], p.holds[i+1:]...)
			p.caught = append(p.caught, a.hold)
			close(a.hold.caught)
			return a
		}
	}
	return nil
}

// matches tells whether request b contains marker, or begins with it for a
// marker that starts with "^".
func matches(b, marker []byte) bool {
	if prefix, ok := bytes.CutPrefix(marker, []byte("^")); ok {
		return bytes.HasPrefix(b, prefix)
	}
	return bytes.Contains(b, marker)
}

// CutOne closes one open client connection, if there is one, and tells
// whether there was.
func (p *Proxy) CutOne() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	for c := range p.conns {
		if c.LocalAddr().String() == p.Addr {
			c.Close()
			return true
		}
	}
	return false
}

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

// Close stops the proxy and closes its connections; what it held is let go
// first, so that no goroutine waits for a Release that never comes.
func (p *Proxy) Close() {
	// Refused first: a connection accepted just before the listener
	// closed, still dialling Redis, would otherwise be tracked after the
	// Cut below and live until its client hung up (an agent: minutes).
	p.Refuse(true)
	p.ln.Close()
	p.mu.Lock()
	holds := p.caught
	for _, a := range p.holds {
		holds = append(holds, a.hold)
	}
	p.mu.Unlock()
	for _, h := range holds {
		h.Release()
	}
	p.Cut()
	p.wg.Wait()
}

func (p *Proxy) track(c net.Conn) {
	p.mu.Lock()
	p.conns[c] = struct{}{}
	p.mu.Unlock()
}

// trackPair keeps a new connection's two sides, unless new connections
// were refused while it was being dialled: then it closes them. Under
// p.mu, as Cut is, so that a Refuse then a Cut leave no connection open,
// however long the dial took.
func (p *Proxy) trackPair(c, s net.Conn) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.refuse.Load() {
		c.Close()
		s.Close()
		return false
	}
	p.conns[c], p.conns[s] = struct{}{}, struct{}{}
	return true
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
		s, err := net.DialTimeout("tcp", *p.target.Load(), time.Second)
		if err != nil {
			c.Close()
			continue
		}
		if !p.trackPair(c, s) {
			continue
		}
		p.wg.Add(2)
		go p.pipe(c, s, &p.up, s)
		go p.pipe(s, c, &p.down, nil)
	}
}

type chunk struct {
	b    []byte
	at   time.Time
	gate <-chan struct{} // nil, or closed when the chunk may go
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
			if c.gate != nil {
				<-c.gate
			}
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
			var gate <-chan struct{}
			p.mu.Lock()
			drop, partition := false, false
			switch a := (*armed)(nil); {
			case server != nil && p.dropTo != nil && bytes.Contains(b, p.dropTo):
				p.dropping[server], p.dropTo = true, nil
			case server != nil && len(p.holds) > 0:
				if a = p.catch(b); a == nil {
					break
				}
				switch a.kind {
				case holdRequest:
					gate = a.hold.gate
				case holdReply:
					p.replyHold[server] = a.hold
				case duplicate:
					p.wg.Add(1)
					go p.sendCopy(commandsWith(b, a.markers), a.hold)
				}
			case server == nil && p.dropping[src]:
				delete(p.dropping, src)
				drop, partition = true, p.cutAfter
				p.cutAfter, p.droppedAt = false, time.Now()
			case server == nil && p.replyHold[src] != nil:
				gate = p.replyHold[src].gate
				delete(p.replyHold, src)
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
			q <- chunk{b: b, at: time.Now().Add(time.Duration(lat.Load())), gate: gate}
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

// sendCopy sends request b to Redis on a connection of its own once h is
// released, and drops the reply.
// commandsWith returns the commands of b (RESP arrays of bulk strings, as
// clients send them) that match one of markers; all of b if it is not
// whole commands (a read that split one).
func commandsWith(b []byte, markers [][]byte) []byte {
	var out []byte
	for rest := b; len(rest) > 0; {
		n := commandLen(rest)
		if n == 0 {
			return b
		}
		if cmd := rest[:n]; slices.ContainsFunc(markers, func(m []byte) bool { return matches(cmd, m) }) {
			out = append(out, cmd...)
		}
		rest = rest[n:]
	}
	return out
}

// commandLen is the length of the command b begins with, "*N\r\n" then N
// "$len\r\n<bytes>\r\n"; 0 if b does not begin with a whole one.
func commandLen(b []byte) int {
	count, at, ok := respHeader(b, '*', 0)
	if !ok {
		return 0
	}
	for range count {
		size, next, ok := respHeader(b, '$', at)
		if !ok || next+size+2 > len(b) {
			return 0
		}
		at = next + size + 2
	}
	return at
}

// respHeader reads "<kind><number>\r\n" at b[at:], and returns the number
// and where what follows it starts.
func respHeader(b []byte, kind byte, at int) (n, next int, ok bool) {
	if at >= len(b) || b[at] != kind {
		return 0, 0, false
	}
	end := bytes.Index(b[at:], []byte("\r\n"))
	if end < 0 {
		return 0, 0, false
	}
	n, err := strconv.Atoi(string(b[at+1 : at+end]))
	if err != nil || n < 0 {
		return 0, 0, false
	}
	return n, at + end + 2, true
}

func (p *Proxy) sendCopy(b []byte, h *Hold) {
	defer p.wg.Done()
	<-h.gate
	s, err := net.DialTimeout("tcp", *p.target.Load(), time.Second)
	if err != nil {
		return
	}
	defer s.Close()
	p.track(s)
	defer p.untrack(s)
	if _, err := s.Write(b); err != nil {
		return
	}
	// Redis runs the copy before it reads the connection's end; its reply,
	// read for at most a second, goes nowhere.
	s.SetReadDeadline(time.Now().Add(time.Second)) //nolint:errcheck // a closed conn fails the read below
	io.Copy(io.Discard, s)                         //nolint:errcheck // the reply is dropped
}
