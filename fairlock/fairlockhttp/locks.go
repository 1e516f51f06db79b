package fairlockhttp

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/fairlock/fairlock/fairlock"
)

// Paging: how many locks a page shows, and how many waiters of each.
const (
	defaultPerPage = 20
	maxPerPage     = 200
	defaultWaiters = 25
)

// inspectors is how many Inspect calls a reading runs at once: a page of
// 200 locks is 25 round trips deep, not 200.
const inspectors = 8

// kindNamed is the kind called s (fairlock.LockKind.String), or 0.
func kindNamed(s string) fairlock.LockKind {
	for _, k := range fairlock.Kinds() {
		if k.Lock.String() == s {
			return k.Lock
		}
	}
	return 0
}

// kindNames lists the kinds' names, for an error message.
func kindNames() string {
	var names []string
	for _, k := range fairlock.Kinds() {
		names = append(names, k.Lock.String())
	}
	return strings.Join(names, ", ")
}

// A query is what locks.json is asked for.
type query struct {
	page, perPage, waiters int
	filter                 string
	kind                   fairlock.LockKind // with name: that lock alone
	name                   string
}

// parseQuery reads locks.json's parameters; an error says which is wrong.
func parseQuery(v url.Values) (query, error) {
	q := query{page: 1, perPage: defaultPerPage, waiters: defaultWaiters, filter: v.Get("q"), name: v.Get("name")}
	for _, p := range []struct {
		key      string
		to       *int
		min, max int
	}{{"page", &q.page, 1, 1 << 30}, {"per_page", &q.perPage, 1, maxPerPage}, {"waiters", &q.waiters, 1, fairlock.MaxListed}} {
		s := v.Get(p.key)
		if s == "" {
			continue
		}
		n, err := strconv.Atoi(s)
		if err != nil || n < p.min || n > p.max {
			return q, fmt.Errorf("%s must be a number from %d to %d, not %q", p.key, p.min, p.max, s)
		}
		*p.to = n
	}
	if k := v.Get("kind"); k != "" || q.name != "" {
		if q.kind = kindNamed(k); q.kind == 0 || q.name == "" {
			return q, fmt.Errorf("one lock is asked for with kind (%s) and name, both", kindNames())
		}
	}
	return q, nil
}

func (h *Handler) serveLocks(w http.ResponseWriter, r *http.Request) {
	if onlyReading(w, r) {
		return
	}
	q, err := parseQuery(r.URL.Query())
	if err != nil {
		writeJSON(w, http.StatusBadRequest, errorJSON{err.Error()})
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), readTimeout)
	defer cancel()
	out := h.read(ctx, q)
	status := http.StatusOK
	if out.Error != "" {
		status = http.StatusServiceUnavailable
	}
	writeJSON(w, status, out)
}

// read reads the page of locks q asks for; a failure is out.Error.
func (h *Handler) read(ctx context.Context, q query) pageJSON {
	out := pageJSON{ReadAt: time.Now().UTC(), RefreshMs: h.refresh.Milliseconds(), ForceRelease: h.force,
		Page: 1, Pages: 1, PerPage: q.perPage, Locks: []lockJSON{}}
	locks := []fairlock.LockInUse{{Name: q.name, Lock: q.kind}}
	if q.name == "" {
		all, err := h.list.get(ctx, h.locker, h.refresh)
		if err != nil {
			out.Error = explain(err)
			return out
		}
		var matching []fairlock.LockInUse
		for _, lk := range all {
			if strings.Contains(lk.Name, q.filter) {
				matching = append(matching, lk)
			}
		}
		out.InUse, out.Matching = len(all), len(matching)
		out.Pages = max(1, (len(matching)+q.perPage-1)/q.perPage)
		out.Page = min(q.page, out.Pages)
		locks = matching[min((out.Page-1)*q.perPage, len(matching)):min(out.Page*q.perPage, len(matching))]
	}
	states, err := inspectAll(ctx, h.locker, locks)
	if err != nil {
		out.Error = explain(err)
		return out
	}
	for _, st := range states {
		if q.name != "" && (st.Held() || st.Queued > 0) {
			out.InUse, out.Matching = 1, 1
		}
		out.Locks = append(out.Locks, lockOf(st, q.waiters))
	}
	return out
}

// inspectAll reads the state of each lock, a few at once.
func inspectAll(ctx context.Context, l *fairlock.Locker, locks []fairlock.LockInUse) ([]fairlock.State, error) {
	states := make([]fairlock.State, len(locks))
	errs := make([]error, len(locks))
	slots := make(chan struct{}, inspectors)
	var wg sync.WaitGroup
	for i, lk := range locks {
		wg.Go(func() {
			slots <- struct{}{}
			defer func() { <-slots }()
			states[i], errs[i] = l.Inspect(ctx, lk.Lock, lk.Name)
		})
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return nil, err // the first: the others are most often the same
		}
	}
	return states, nil
}

// lockList is the scan of the locks in use (Locker.Locks) that the open
// pages share. A scan reads every key of the database, so it runs at most
// once per refresh interval, or per ten times the last scan's time when
// that is longer, however many pages are open; the locks shown are read
// anew on every request.
type lockList struct {
	mu    sync.Mutex
	at    time.Time
	took  time.Duration
	locks []fairlock.LockInUse
}

func (c *lockList) get(ctx context.Context, l *fairlock.Locker, every time.Duration) ([]fairlock.LockInUse, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.locks != nil && time.Since(c.at) < max(every, 10*c.took) {
		return c.locks, nil
	}
	start := time.Now()
	locks, err := l.Locks(ctx)
	if err != nil {
		return nil, err // not kept: the next request asks again
	}
	c.at, c.took, c.locks = time.Now(), time.Since(start), locks
	if c.locks == nil {
		c.locks = []fairlock.LockInUse{}
	}
	return c.locks, nil
}

// explain says in a line what went wrong reading Redis, for the page's
// banner: an unreachable server says so and why, without the client's
// layers.
func explain(err error) string {
	var op *net.OpError
	switch {
	case errors.Is(err, context.DeadlineExceeded):
		return fmt.Sprintf("Redis did not answer within %v", readTimeout)
	case errors.As(err, &op):
		cause := op.Err
		var serr *os.SyscallError
		if errors.As(cause, &serr) {
			cause = serr.Err
		}
		where := "Redis"
		if op.Addr != nil {
			where = "Redis at " + op.Addr.String()
		}
		if op.Op == "dial" {
			return fmt.Sprintf("cannot connect to %s: %v", where, cause)
		}
		return fmt.Sprintf("the connection to %s failed: %v", where, cause)
	}
	return strings.TrimPrefix(err.Error(), "fairlock: ")
}

// errorJSON is the body of a request refused or failed.
type errorJSON struct {
	Error string `json:"error"`
}

// writeJSON answers v, which the page reads, never cached.
func writeJSON(w http.ResponseWriter, status int, v any) {
	securityHeaders(w)
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	w.WriteHeader(status)
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	enc.Encode(v) //nolint:errcheck // a failed write is the client's going away
}
