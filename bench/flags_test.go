package main

import (
	"flag"
	"testing"
	"time"
)

// TestFlags checks that every flag is registered once (a second
// registration panics), that those run.sh and runContendedMP pass exist,
// and that -scenarios still lists every scenario in the order they run.
func TestFlags(t *testing.T) {
	fs := flag.NewFlagSet("bench", flag.ContinueOnError)
	c := newConfig(fs)
	for _, name := range []string{"redis", "etcd", "etcd-pid", "peers", "out", "baseline", "sidebyside", "freeport", "fairlock-built",
		"child", "child-workers", "child-idbase", "child-name", "lease", "spin", "contended-hold"} {
		if fs.Lookup(name) == nil {
			t.Errorf("no flag -%s", name)
		}
	}
	want := "limit,uncontended,names,contended,contended-mp,fifo,scale,semaphore,semaphore-weighted,tenants,tenants-weighted,priority-lanes,rwmutex,semaphore-drain"
	if got := fs.Lookup("scenarios").DefValue; got != want {
		t.Errorf("-scenarios default %q, want %q", got, want)
	}
	if err := fs.Parse([]string{"-contended-hold", "2ms", "-sem-capacity", "3"}); err != nil {
		t.Fatal(err)
	}
	if c.cont.hold != 2*time.Millisecond || c.sem.capacity != 3 {
		t.Errorf("parsed hold %v, capacity %d", c.cont.hold, c.sem.capacity)
	}
}
