package fairlock

import (
	"fmt"
	"strings"
)

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

// lockKeys returns the keys of the lock of kind k called name in the
// order the scripts take them (scripts/lib/keys.lua): holders (kind.holdersKey),
// queue, order, fence, meta and state, under the kind's key space. They
// share the hash tag {name}, so a Redis Cluster keeps them in one slot.
func lockKeys(prefix string, k *kind, name string) []string {
	base := tagBase(prefix, name) + k.space
	return []string{base + k.holdersKey(), base + "queue", base + "order", base + "fence", base + "meta", base + "state"}
}

// tagBase is what every key of the locks called name starts with.
func tagBase(prefix, name string) string {
	return keyBase(prefix) + "{" + nameEscaper.Replace(name) + "}:"
}

// sessionPrefix is what the keys of a session start with: one per Redis,
// or on Redis Cluster one per lock name, in that name's slot, since a
// script sees only the keys of its own slot.
func sessionPrefix(prefix, name string, sharded bool) string {
	if sharded {
		return tagBase(prefix, name) + "session:"
	}
	return keyBase(prefix) + "session:"
}

// keyBase is what every key under prefix starts with.
func keyBase(prefix string) string {
	if prefix == "" {
		return ""
	}
	return prefix + ":"
}

// nameFromKey returns the lock name of key if it is a key with that suffix
// ("lock", "sem:order", ...) under prefix.
func nameFromKey(prefix, suffix, key string) (string, bool) {
	esc, ok := strings.CutPrefix(key, keyBase(prefix)+"{")
	if !ok {
		return "", false
	}
	if esc, ok = strings.CutSuffix(esc, "}:"+suffix); !ok {
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

// hashTag is what Redis Cluster hashes of key: what its first "{" and the
// first "}" after it enclose, if that is not empty, else the whole key.
func hashTag(key string) string {
	if open := strings.IndexByte(key, '{'); open >= 0 {
		if n := strings.IndexByte(key[open+1:], '}'); n > 0 {
			return key[open+1 : open+1+n]
		}
	}
	return key
}

// keySlot is the Redis Cluster slot of key: CRC16 (XMODEM) of its hash
// tag, modulo 16384.
func keySlot(key string) int {
	var crc uint16
	for _, b := range []byte(hashTag(key)) {
		crc ^= uint16(b) << 8
		for range 8 {
			if crc&0x8000 != 0 {
				crc = crc<<1 ^ 0x1021
			} else {
				crc <<= 1
			}
		}
	}
	return int(crc) % 16384
}
