package fairlock

import (
	"fmt"
	"strconv"
	"strings"
	"sync/atomic"
	"unicode/utf8"
)

// MaxNameLen is the longest lock name, in bytes, that fairlock accepts. A
// name is repeated in each of a lock's six keys, in every script call, and
// on Redis Cluster in its notification channel; escaping can triple it. At
// 4 KiB a call carries at most 72 KiB of name, while any real name (a path,
// a URL, a composite id) fits with room to spare. Longer names are refused
// with ErrInvalid before any Redis call.
const MaxNameLen = 4 << 10

// nameEscaper makes any byte string safe as a Redis Cluster hash tag: a
// brace would end or start the tag, and escaping '%' too keeps two
// different names from ever sharing keys.
var nameEscaper = strings.NewReplacer("%", "%25", "{", "%7B", "}", "%7D")

// unescapeName inverts nameEscaper; ok is false for a string nameEscaper
// cannot have produced.
func unescapeName(s string) (name string, ok bool) {
	if strings.ContainsAny(s, "{}") {
		return "", false
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] != '%' {
			b.WriteByte(s[i])
			continue
		}
		if i+2 >= len(s) {
			return "", false
		}
		switch s[i+1 : i+3] {
		case "25":
			b.WriteByte('%')
		case "7B":
			b.WriteByte('{')
		case "7D":
			b.WriteByte('}')
		default:
			return "", false
		}
		i += 2
	}
	return b.String(), true
}

// Key spaces: a mutex, a semaphore and a read-write lock of one name keep
// their keys apart, so that they are independent of one another.
const (
	spaceMutex     = ""
	spaceSemaphore = "sem:"
	spaceRW        = "rw:"
)

// lockKeys returns the keys of one lock in the order the scripts take them
// (see scripts/lib/keys.lua): for a mutex lock, queue, alive, fence, order
// and meta; for a semaphore or read-write lock (space spaceSemaphore or
// spaceRW) the same under the space, with holders first and state last.
// They share the hash tag {name}, so a Redis Cluster keeps them in one
// slot.
func lockKeys(prefix, space, name string) []string {
	base := keyBase(prefix) + "{" + nameEscaper.Replace(name) + "}:" + space
	if space == spaceMutex {
		return []string{base + "lock", base + "queue", base + "alive", base + "fence", base + "order", base + "meta"}
	}
	return []string{base + "holders", base + "queue", base + "alive", base + "fence", base + "order", base + "meta", base + "state"}
}

// keyBase is what every key under prefix starts with.
func keyBase(prefix string) string {
	if prefix == "" {
		return ""
	}
	return prefix + ":"
}

// nameFromKey returns the lock name of key if it is a key of that kind
// ("lock", "queue", ...) under prefix.
func nameFromKey(prefix, kind, key string) (string, bool) {
	esc, ok := strings.CutPrefix(key, keyBase(prefix)+"{")
	if !ok {
		return "", false
	}
	if esc, ok = strings.CutSuffix(esc, "}:"+kind); !ok {
		return "", false
	}
	return unescapeName(esc)
}

func checkName(name string) error {
	switch {
	case name == "":
		return fmt.Errorf("%w: empty lock name", ErrInvalid)
	case len(name) > MaxNameLen:
		return fmt.Errorf("%w: lock name %s is longer than MaxNameLen (%s)", ErrInvalid, quoteName(name), byteSize(MaxNameLen))
	}
	return nil
}

// A lockRef is what every script call on one lock needs, worked out once
// per name: its keys, boxed as command arguments, and where its grant
// notifications go.
type lockRef struct {
	name    string
	space   string     // spaceMutex, spaceSemaphore or spaceRW
	kind    LockKind   // for the events of the whole lock (LockRead for a read-write lock)
	scripts *scriptSet // the scripts of its holder store
	keys    []string
	args    []any // keys, boxed once so that calls do not allocate them
	// fastArgs are the fast path's EXISTS queue, INCR fence and PEXPIRE
	// fence NX, built once (go-redis only reads a command's arguments).
	fastArgs [3][]any
	notify   [2]any // notify command and channel prefix, the ARGV of every script that may grant
	channel  string // this Locker's channel for the lock's grants
	// busyUntil is when the fast path is worth trying again (unix ns),
	// after it found the lock held or waited for; trying is set while a
	// call tries it (Locker.fastTry).
	busyUntil atomic.Int64
	trying    atomic.Bool
}

// refCacheSize bounds the lockRefs a Locker keeps: a process that touches
// millions of names recomputes some, and keeps no more than this.
const refCacheSize = 4096

// refKey names a lock among a Locker's: its key space and name.
type refKey struct{ space, name string }

// key is r's refKey.
func (r *lockRef) key() refKey { return refKey{r.space, r.name} }

// ref returns the lockRef of the lock called name in space.
func (l *Locker) ref(space, name string) *lockRef {
	l.mu.Lock()
	defer l.mu.Unlock()
	if r := l.refs[refKey{space, name}]; r != nil {
		return r
	}
	if len(l.refs) >= refCacheSize {
		clear(l.refs)
	}
	keys := lockKeys(l.cfg.prefix, space, name)
	r := &lockRef{name: name, space: space, kind: LockMutex, scripts: &mutexScripts, keys: keys, args: make([]any, len(keys))}
	switch space {
	case spaceSemaphore:
		r.kind, r.scripts = LockSemaphore, &countedScripts
	case spaceRW:
		r.kind, r.scripts = LockRead, &countedScripts
	}
	for i, k := range keys {
		r.args[i] = k
	}
	r.fastArgs = [3][]any{{"exists", r.args[1]}, {"incr", r.args[3]}, {"pexpire", r.args[3], fenceTTLMs, "nx"}}
	cmd, prefix := l.notifyArgs(keys)
	r.notify = [2]any{cmd, prefix}
	r.channel = prefix + l.id
	l.refs[refKey{space, name}] = r
	return r
}

// call returns the arguments of one script call on the lock: three slots
// that luaScript.run fills, the lock's keys, then argv.
func (r *lockRef) call(argv ...any) []any {
	args := make([]any, 3, 3+len(r.args)+len(argv))
	args = append(args, r.args...)
	return append(args, argv...)
}

// quotedNameLen is how much of a lock name errors and log lines show.
const quotedNameLen = 32

// quoteName quotes a lock name for an error or log line: whole if short,
// else its first quotedNameLen bytes and its length, so that a huge name
// cannot flood a log.
func quoteName(name string) string {
	if len(name) <= quotedNameLen {
		return strconv.Quote(name)
	}
	cut := quotedNameLen
	for cut > 0 && !utf8.RuneStart(name[cut]) {
		cut--
	}
	return strconv.Quote(name[:cut]+"…") + " (" + byteSize(len(name)) + ")"
}

// byteSize writes n bytes the way people read sizes: "600 MiB", "4.5 KiB".
func byteSize(n int) string {
	units := []string{"bytes", "KiB", "MiB", "GiB"}
	size, unit := float64(n), 0
	for size >= 1024 && unit < len(units)-1 {
		size /= 1024
		unit++
	}
	return strings.TrimSuffix(strconv.FormatFloat(size, 'f', 1, 64), ".0") + " " + units[unit]
}
