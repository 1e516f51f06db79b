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
