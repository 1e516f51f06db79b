package fairlock

// Fuzz targets of the code that turns untrusted input into Redis keys,
// options, and script replies into values. CI runs each for a few seconds
// (go test -fuzz=FuzzX -fuzztime=5s ./fairlock/); the seed corpus below and
// in testdata/fuzz runs with every plain `go test`.

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"math"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/fairlock/fairlock/internal/redistest"
)

var nameSeeds = []string{
	"a", "orders", "{", "}", "{}", "}{", "%", "%7B", "%25", "%7D", "{a}", "a:b", "a b", "\x00", "\xff\xfe",
	"%%7B", "{%}", "x}:lock", ":{", "name with spaces", "日本語", strings.Repeat("z", 300),
	strings.Repeat("{", MaxNameLen), strings.Repeat("y", MaxNameLen+1),
}

// checkKeys verifies the key layout of one (prefix, name).
func checkKeys(t *testing.T, prefix, name string) []string {
	t.Helper()
	keys := lockKeys(prefix, mutexKind, name)
	if len(keys) != 6 {
		t.Fatalf("lockKeys(%q, %q) returned %d keys", prefix, name, len(keys))
	}
	// Every other kind's keys: the same hash tag, six each, and none
	// shared with another kind.
	seen := map[string]bool{}
	for _, k := range keys {
		seen[k] = true
	}
	for _, kd := range kinds[1:] {
		counted := lockKeys(prefix, kd, name)
		if len(counted) != 6 {
			t.Fatalf("lockKeys(%q, %s, %q) returned %d keys", prefix, kd.name, name, len(counted))
		}
		for _, k := range counted {
			if hashTag(k) != hashTag(keys[0]) || seen[k] {
				t.Fatalf("key %q of the %s %q: hash tag %q, or shared with another kind", k, kd.name, name, hashTag(k))
			}
			seen[k] = true
		}
	}
	esc := nameEscaper.Replace(name)
	if strings.ContainsAny(esc, "{}") {
		t.Fatalf("escaped name %q still contains a brace", esc)
	}
	back, ok := unescapeName(esc)
	if !ok || back != name {
		t.Fatalf("escape of %q is %q, which does not read back (got %q, %v)", name, esc, back, ok)
	}
	suffixes := []string{"lock", "queue", "order", "fence", "meta", "state"}
	for i, k := range keys {
		if got := hashTag(k); got != esc {
			t.Fatalf("key %q of name %q hashes on %q, want the escaped name %q", k, name, got, esc)
		}
		want := "{" + esc + "}:" + suffixes[i]
		if prefix != "" {
			want = prefix + ":" + want
		}
		if k != want {
			t.Fatalf("key %d of (%q, %q) = %q, want %q", i, prefix, name, k, want)
		}
		if back, ok := nameFromKey(prefix, suffixes[i], k); !ok || back != name {
			t.Fatalf("nameFromKey(%q, %q, %q) = %q, %v; want %q", prefix, suffixes[i], k, back, ok, name)
		}
	}
	return keys
}

// FuzzLockKeys: every name maps to six keys in one hash slot, the mapping
// reads back (nameFromKey, as the operator's list uses it), and two
// different (prefix, name) pairs never share a key.
func FuzzLockKeys(f *testing.F) {
	for _, n := range nameSeeds {
		f.Add("fairlock", n, "fairlock", n+"x")
		f.Add("", n, "x", n)
	}
	f.Add("a", "b:{c}", "a:{b", "c}")
	f.Add("a:", "b", "a", ":b")
	f.Fuzz(func(t *testing.T, p1, n1, p2, n2 string) {
		valid := func(p, n string) bool { return !strings.ContainsAny(p, "{}") && checkName(n) == nil }
		if !valid(p1, n1) || !valid(p2, n2) {
			if n1 == "" && checkName(n1) == nil {
				t.Fatal("empty name accepted")
			}
			return
		}
		k1, k2 := checkKeys(t, p1, n1), checkKeys(t, p2, n2)
		same := p1 == p2 && n1 == n2
		for _, a := range k1 {
			for _, b := range k2 {
				if a == b && !same {
					t.Fatalf("(%q, %q) and (%q, %q) share the key %q", p1, n1, p2, n2, a)
				}
			}
		}
	})
}

// FuzzOptions: New never panics, accepts exactly the valid options (a
// heartbeat of at least MinHeartbeat, TTLs up to MaxTTL, a prefix without
// braces), and a valid
// Locker has a heartbeat no longer than a third of either TTL.
func FuzzOptions(f *testing.F) {
	f.Add(int64(time.Second), int64(time.Second), "fairlock", true)
	f.Add(int64(time.Millisecond), int64(time.Millisecond), "", false)
	f.Add(int64(3*MinHeartbeat), int64(3*MinHeartbeat), "", false)
	f.Add(int64(3*MinHeartbeat-1), int64(time.Hour), "", false)
	f.Add(int64(time.Millisecond-1), int64(time.Second), "p", true)
	f.Add(int64(0), int64(-1), "p", true)
	f.Add(int64(math.MaxInt64), int64(math.MaxInt64), "p{", true)
	f.Add(int64(math.MinInt64), int64(time.Hour), "}", true)
	f.Add(int64(100*time.Millisecond), int64(3*time.Second), "a:b c", false)
	f.Add(int64(MaxTTL), int64(MaxTTL+1), "p", true)
	client := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1"}) // never contacted by New
	f.Cleanup(func() { client.Close() })
	f.Fuzz(func(t *testing.T, lease, waiter int64, prefix string, renew bool) {
		l, err := New(client, WithLeaseTTL(time.Duration(lease)), WithWaiterTTL(time.Duration(waiter)),
			WithKeyPrefix(prefix), WithAutoRenew(renew))
		valid := min(lease, waiter) >= int64(3*MinHeartbeat) && max(lease, waiter) <= int64(MaxTTL) &&
			!strings.ContainsAny(prefix, "{}")
		if err != nil {
			if valid {
				t.Fatalf("valid options refused: lease %v waiter %v prefix %q: %v", time.Duration(lease), time.Duration(waiter), prefix, err)
			}
			if !errors.Is(err, ErrInvalid) {
				t.Fatalf("bad option error %v does not match ErrInvalid", err)
			}
			return
		}
		defer l.Close()
		if !valid {
			t.Fatalf("invalid options accepted: lease %v waiter %v prefix %q", time.Duration(lease), time.Duration(waiter), prefix)
		}
		hb := l.Heartbeat()
		if hb <= 0 || hb > time.Duration(lease)/3+1 || hb > time.Duration(waiter)/3+1 {
			t.Fatalf("heartbeat %v for lease %v waiter %v", hb, time.Duration(lease), time.Duration(waiter))
		}
		if l.cfg.leaseTTL.Milliseconds() < 1 || l.cfg.waiterTTL.Milliseconds() < 1 {
			t.Fatalf("a TTL rounds to %d/%d ms: Redis would get PX 0", l.cfg.leaseTTL.Milliseconds(), l.cfg.waiterTTL.Milliseconds())
		}
		if r := l.refs.get(mutexKind, "x"); !strings.HasPrefix(r.channel, prefix) || strings.ContainsAny(r.channel, "{}") || !strings.HasPrefix(r.sessions, prefix) {
			t.Fatalf("channel %q, sessions %q from key prefix %q", r.channel, r.sessions, prefix)
		}
	})
}

// decodeReply turns fuzz bytes into a value shaped like go-redis script
// replies: int64, string, nil, redis.Error-like errors and nested []any.
func decodeReply(b []byte, depth int) (any, []byte) {
	if len(b) == 0 {
		return nil, b
	}
	tag, b := b[0], b[1:]
	switch tag % 6 {
	case 0:
		return nil, b
	case 1:
		if len(b) < 8 {
			return int64(len(b)), nil
		}
		return int64(binary.LittleEndian.Uint64(b)), b[8:]
	case 2:
		n := 0
		if len(b) > 0 {
			n, b = int(b[0])%32, b[1:]
		}
		n = min(n, len(b))
		return string(b[:n]), b[n:]
	case 3:
		if depth > 3 {
			return nil, b
		}
		n := 0
		if len(b) > 0 {
			n, b = int(b[0])%8, b[1:]
		}
		arr := make([]any, 0, n)
		for i := 0; i < n; i++ {
			var v any
			v, b = decodeReply(b, depth+1)
			arr = append(arr, v)
		}
		return arr, b
	case 4:
		return float64(len(b)), b
	default:
		return int64(int8(tag)), b
	}
}

// FuzzReplies: the parsers of every script reply (heartbeat: parseInts;
// snapshot: parseSnapshot; force release: parseForceRelease; grant
// messages: parseGrants) never panic, and what they accept is exactly what
// was there.
func FuzzReplies(f *testing.F) {
	enc := func(parts ...[]byte) []byte { return bytes.Join(parts, nil) }
	i64 := func(v int64) []byte {
		b := make([]byte, 9)
		b[0] = 1
		binary.LittleEndian.PutUint64(b[1:], uint64(v))
		return b
	}
	str := func(s string) []byte { return append([]byte{2, byte(len(s))}, s...) }
	arr := func(n int) []byte { return []byte{3, byte(n)} }
	f.Add(enc(arr(2), i64(1), i64(1795989491926942)), "tok:1 1795989491926942")
	f.Add(enc(arr(2), i64(2), i64(3)), "a:b:c 12")
	f.Add(enc(arr(5), i64(0), i64(1795989491926942), i64(1),
		arr(6), str("l.1:1"), i64(345), i64(1795989491926942), str("job 7"), str(""), i64(1),
		arr(6), str("w.1:2"), i64(500), str(""), str("tenant"), i64(3), i64(1200)), "x 0")
	f.Add(enc(arr(5), i64(3), i64(0), i64(0), arr(0), arr(0)), " 5")
	f.Add(enc(arr(5), i64(3), i64(7), i64(2), arr(6), str("l.1:1#2"), i64(345), i64(9), str(""), str(""), i64(1),
		arr(6), str("w.1:2"), i64(500), i64(1), str(""), i64(1), i64(0)), "x 1")
	f.Add(enc(arr(3), i64(1), i64(-1), i64(0)), "tok -7")
	f.Add(enc(arr(2), arr(1), str("old.1:1"), arr(2), str("new.1:1"), i64(1795989491926943)), "f 1")
	f.Add(enc(arr(2), arr(1), str("old.1:1"), arr(0)), "f 2")
	f.Add(enc(arr(2), arr(0), arr(1), str("new.1:1")), "a:1#3 5 b:2 6")
	f.Add([]byte{4}, "tok  12")
	f.Add([]byte{}, "")
	f.Fuzz(func(t *testing.T, data []byte, payload string) {
		reply, _ := decodeReply(data, 0)
		for _, n := range []int{0, 1, 2, 3, 5} {
			vals, err := parseInts(reply, n)
			if err != nil {
				continue
			}
			arr, ok := reply.([]any)
			if !ok || (n > 0 && len(vals) != n) || len(vals) != len(arr) {
				t.Fatalf("parseInts(%#v, %d) = %v: wrong length", reply, n, vals)
			}
			for i, v := range vals {
				if arr[i] != any(v) {
					t.Fatalf("parseInts(%#v, %d)[%d] = %d", reply, n, i, v)
				}
			}
		}
		for _, kd := range kinds {
			st, ok := parseSnapshot(reply, kd)
			if !ok {
				continue
			}
			arr := reply.([]any)
			holders, waiters := arr[3].([]any), arr[4].([]any)
			if len(st.Holders) != len(holders)/6 || len(st.Waiters) != len(waiters)/6 || arr[1] != any(st.Fence) || arr[2] != any(int64(st.Queued)) {
				t.Fatalf("parseSnapshot(%#v) = %+v", reply, st)
			}
			for i, h := range st.Holders {
				if holders[6*i] != any(h.Token) || holders[6*i+3] != any(h.Metadata) || holders[6*i+4] != any(h.Group) ||
					holders[6*i+5] != any(int64(h.Weight)) || h.Permits < 1 {
					t.Fatalf("parseSnapshot(%#v): holder %d is %+v", reply, i, h)
				}
			}
			for i, w := range st.Waiters {
				if w.Position != i+1 || waiters[6*i] != any(w.Token) || waiters[6*i+2] != any(w.Metadata) || waiters[6*i+4] != any(int64(w.Weight)) ||
					waiters[6*i+5] != any(w.Waited.Milliseconds()) {
					t.Fatalf("parseSnapshot(%#v): waiter %d is %+v", reply, i, w)
				}
			}
		}
		if r, ok := parseForceRelease(reply); ok {
			arr := reply.([]any)
			if len(r.Ended) != len(arr[0].([]any)) || len(r.Granted) != len(arr[1].([]any))/2 {
				t.Fatalf("parseForceRelease(%#v) = %+v", reply, r)
			}
		}
		// A grant message: what parseGrants hands out, written back, is
		// the message itself, up to how strconv spells a number ("+5").
		var pairs []string
		ok := parseGrants(payload, func(token string, fence int64) {
			if token == "" || strings.Contains(token, " ") || fence <= 0 {
				t.Fatalf("parseGrants(%q) accepted token %q fence %d", payload, token, fence)
			}
			pairs = append(pairs, token, strconv.FormatInt(fence, 10))
		})
		words := 0
		if trimmed := strings.TrimSuffix(payload, " "); trimmed != "" {
			words = len(strings.Split(trimmed, " "))
		}
		if ok && words != len(pairs) {
			t.Fatalf("parseGrants(%q) read %q", payload, pairs)
		}
		// What the scripts publish always reads back, pair by pair.
		if tok, _, _ := strings.Cut(payload, " "); tok != "" {
			msg := tok + " 1 " + tok + "#2 1795989491926942 " + tok + " " + strconv.FormatInt(math.MaxInt64, 10)
			var got []string
			if !parseGrants(msg, func(token string, fence int64) { got = append(got, token+" "+strconv.FormatInt(fence, 10)) }) ||
				strings.Join(got, " ") != msg {
				t.Fatalf("parseGrants(%q) read %q", msg, got)
			}
		}
	})
}

// FuzzNamesOnRedis runs fuzzed names through the real scripts on a real
// redis-server: the lock is taken, seen by Inspect under its own name only,
// stored under exactly the keys lockKeys gives, all in one cluster slot, and
// released.
func FuzzNamesOnRedis(f *testing.F) {
	for _, n := range nameSeeds {
		f.Add(n, n+"\x00")
	}
	f.Add("a%7Bb", "a{b")
	f.Add("a%25", "a%")
	srv := redistest.Start(f)
	client := redis.NewClient(&redis.Options{Addr: srv.Addr})
	f.Cleanup(func() { client.Close() })
	l, err := New(client, WithLeaseTTL(5*time.Second), WithWaiterTTL(5*time.Second))
	if err != nil {
		f.Fatal(err)
	}
	f.Cleanup(func() { l.Close() })
	f.Fuzz(func(t *testing.T, name, other string) {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if name == "" || len(name) > MaxNameLen {
			if _, err := l.TryAcquire(ctx, name); !errors.Is(err, ErrInvalid) {
				t.Fatalf("name of %d bytes: %v, want ErrInvalid", len(name), err)
			}
			return
		}
		lease, err := l.TryAcquire(ctx, name)
		if err != nil {
			t.Fatalf("TryAcquire(%q): %v", name, err)
		}
		defer lease.Release(ctx) //nolint:errcheck // released below; this is for Fatal paths
		st, err := l.Inspect(ctx, LockMutex, name)
		if err != nil || !st.Held() || st.Holders[0].Token != lease.Token() || st.Fence != lease.Fence() {
			t.Fatalf("Inspect(%q) = %+v, %v; lease %s fence %d", name, st, err, lease.Token(), lease.Fence())
		}
		keys := lockKeys(DefaultKeyPrefix, mutexKind, name)
		if n, err := client.Exists(ctx, keys[0], keys[3]).Result(); err != nil || n != 2 {
			t.Fatalf("lock and fence keys of %q: exists=%d %v (keys %q)", name, n, err, keys)
		}
		slot := keySlot(keys[0])
		for _, k := range keys {
			if keySlot(k) != slot {
				t.Fatalf("keys of %q in different slots: %q", name, keys)
			}
		}
		if other != "" && other != name && len(other) <= MaxNameLen {
			ost, err := l.Inspect(ctx, LockMutex, other)
			if err != nil || ost.Held() {
				t.Fatalf("holding %q makes %q look held: %+v %v", name, other, ost, err)
			}
		}
		if err := lease.Release(ctx); err != nil {
			t.Fatalf("Release(%q): %v", name, err)
		}
		if n, _ := client.Exists(ctx, keys[0]).Result(); n != 0 {
			t.Fatalf("lock key of %q left after Release", name)
		}
	})
}

// FuzzKindsOnRedis runs fuzzed names, capacities and permits through the
// semaphore and the read-write lock on a real redis-server: bad arguments
// are ErrInvalid before any command, good ones are granted on an idle lock,
// seen by Inspect, kept in one cluster slot, and given back whole.
func FuzzKindsOnRedis(f *testing.F) {
	f.Add("jobs", 4, 3, false)
	f.Add("a{b}", 1, 1, true)
	f.Add("", 3, 1, false)
	f.Add("x", 0, 1, false)
	f.Add("x", 2, 3, true)
	f.Add("x", MaxCapacity, MaxCapacity, false)
	f.Add("x", MaxCapacity+1, 1, false)
	f.Add("\xff", -5, -7, true)
	srv := redistest.Start(f)
	client := redis.NewClient(&redis.Options{Addr: srv.Addr})
	f.Cleanup(func() { client.Close() })
	l, err := New(client, WithLeaseTTL(5*time.Second), WithWaiterTTL(5*time.Second))
	if err != nil {
		f.Fatal(err)
	}
	f.Cleanup(func() { l.Close() })
	f.Fuzz(func(t *testing.T, name string, capacity, n int, write bool) {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		badName := name == "" || len(name) > MaxNameLen
		sem, err := l.Semaphore(name, capacity)
		if bad := badName || capacity < 1 || capacity > MaxCapacity; bad != (err != nil) || (bad && !errors.Is(err, ErrInvalid)) {
			t.Fatalf("Semaphore(%q, %d): %v", name, capacity, err)
		}
		if err == nil {
			lease, err := sem.TryAcquire(ctx, n)
			if bad := n < 1 || n > capacity; bad {
				if !errors.Is(err, ErrInvalid) {
					t.Fatalf("TryAcquire(%d) of %d: %v, want ErrInvalid", n, capacity, err)
				}
			} else {
				if err != nil {
					t.Fatalf("TryAcquire(%d) of %d on %q: %v", n, capacity, name, err)
				}
				if st, err := sem.Inspect(ctx); err != nil || st.Capacity != capacity || st.InUse != n || len(st.Holders) != 1 || st.Fence != lease.Fence() || st.Holders[0].Fence != lease.Fence() {
					t.Fatalf("Inspect after TryAcquire(%d) of %d: %+v, %v", n, capacity, st, err)
				}
				for _, k := range lockKeys(DefaultKeyPrefix, semaphoreKind, name) {
					if keySlot(k) != keySlot(lockKeys(DefaultKeyPrefix, mutexKind, name)[0]) {
						t.Fatalf("semaphore key %q in another slot", k)
					}
				}
				if err := lease.Release(ctx); err != nil {
					t.Fatalf("Release: %v", err)
				}
				if st, _ := sem.Inspect(ctx); st.InUse != 0 || st.Held() {
					t.Fatalf("after Release: %+v", st)
				}
			}
		}
		m, err := l.RWMutex(name)
		if badName != (err != nil) {
			t.Fatalf("RWMutex(%q): %v", name, err)
		}
		if err != nil {
			return
		}
		take := m.TryRLock
		if write {
			take = m.TryLock
		}
		lease, err := take(ctx)
		if err != nil {
			t.Fatalf("TryLock (write %v) of %q: %v", write, name, err)
		}
		if st, err := m.Inspect(ctx); err != nil || len(st.Holders) != 1 || (!st.Holders[0].Shared) != write {
			t.Fatalf("Inspect of a lock held (write %v): %+v, %v", write, st, err)
		}
		if err := lease.Release(ctx); err != nil {
			t.Fatalf("Release: %v", err)
		}
	})
}
