package fairlock

import (
	"fmt"
	"strings"
)

// nameEscaper makes any byte string safe as a Redis Cluster hash tag: a
// brace would end or start the tag, and escaping '%' too keeps two
// different names from ever sharing keys.
var nameEscaper = strings.NewReplacer("%", "%25", "{", "%7B", "}", "%7D")

// lockKeys returns the keys of one lock in the order the scripts take them
// (lock, queue, alive, fence). They share the hash tag {name}, so a Redis
// Cluster keeps them in one slot.
func lockKeys(prefix, name string) []string {
	base := "{" + nameEscaper.Replace(name) + "}:"
	if prefix != "" {
		base = prefix + ":" + base
	}
	return []string{base + "lock", base + "queue", base + "alive", base + "fence"}
}

func checkName(name string) error {
	if name == "" {
		return fmt.Errorf("%w: empty lock name", ErrInvalid)
	}
	return nil
}

// A lockRef is what every script call on one lock needs, worked out once
// per name: its keys, boxed as command arguments, and where its grant
// notifications go.
type lockRef struct {
	name    string
	keys    []string
	args    []any  // keys, boxed once so that calls do not allocate them
	notify  [2]any // notify command and channel prefix, the ARGV of every script that may grant
	channel string // this Locker's channel for the lock's grants
}

// refCacheSize bounds the lockRefs a Locker keeps: a process that touches
// millions of names recomputes some, and keeps no more than this.
const refCacheSize = 4096

// ref returns the lockRef of name.
func (l *Locker) ref(name string) *lockRef {
	l.mu.Lock()
	defer l.mu.Unlock()
	if r := l.refs[name]; r != nil {
		return r
	}
	if len(l.refs) >= refCacheSize {
		clear(l.refs)
	}
	keys := lockKeys(l.cfg.prefix, name)
	r := &lockRef{name: name, keys: keys, args: make([]any, len(keys))}
	for i, k := range keys {
		r.args[i] = k
	}
	cmd, prefix := l.notifyArgs(keys)
	r.notify = [2]any{cmd, prefix}
	r.channel = prefix + l.id
	l.refs[name] = r
	return r
}

// call returns the arguments of one script call on the lock: three slots
// that luaScript.run fills, the lock's keys, then argv.
func (r *lockRef) call(argv ...any) []any {
	args := make([]any, 3, 3+len(r.args)+len(argv))
	args = append(args, r.args...)
	return append(args, argv...)
}
