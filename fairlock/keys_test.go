package fairlock

import (
	"strings"
	"testing"
)

func TestQuoteName(t *testing.T) {
	t.Parallel()
	for name, want := range map[string]string{
		"account:42":                             `"account:42"`,
		strings.Repeat("a", quotedNameLen):       `"` + strings.Repeat("a", quotedNameLen) + `"`,
		strings.Repeat("b", 3<<20):               `"` + strings.Repeat("b", quotedNameLen) + `…" (3 MiB)`,
		strings.Repeat("c", 4608):                `"` + strings.Repeat("c", quotedNameLen) + `…" (4.5 KiB)`,
		strings.Repeat("é", quotedNameLen):       `"` + strings.Repeat("é", quotedNameLen/2) + `…" (64 bytes)`,
		"x" + strings.Repeat("é", quotedNameLen): `"x` + strings.Repeat("é", quotedNameLen/2-1) + `…" (65 bytes)`,
		"\x00" + strings.Repeat("z", 40):         `"\x00` + strings.Repeat("z", quotedNameLen-1) + `…" (41 bytes)`,
	} {
		if got := quoteName(name); got != want {
			t.Errorf("quoteName(%.40q) = %s, want %s", name, got, want)
		}
	}
}

// keySlot agrees with Redis 7.0's CLUSTER KEYSLOT, hash tags and empty
// tags included.
func TestKeySlot(t *testing.T) {
	for key, want := range map[string]int{
		"123456789": 12739, "somekey": 11058, "foo{hash_tag}": 2515, "a{123456789}b{c}": 12739,
		"{}123456789": 1951, "x{}y": 16116, "{acct:5}:queue": 10200, "": 0,
	} {
		if got := keySlot(key); got != want {
			t.Errorf("keySlot(%q) = %d, want %d", key, got, want)
		}
	}
}
