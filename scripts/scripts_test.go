package scripts_test

import (
	"context"
	"regexp"
	"sort"
	"strings"
	"testing"

	"github.com/alicebob/miniredis/v2"
	"github.com/fairlock/fairlock/internal/redistest"
	"github.com/fairlock/fairlock/scripts"
	"github.com/redis/go-redis/v9"
)

// Lua's own functions and libraries, which a script may call without
// defining them.
var builtins = map[string]bool{
	"tonumber": true, "tostring": true, "type": true, "unpack": true, "ipairs": true, "pairs": true,
	"error": true, "pcall": true, "select": true, "next": true, "assert": true,
}

var (
	defined = regexp.MustCompile(`local\s+function\s+([A-Za-z_]\w*)|local\s+([A-Za-z_][\w\s,]*?)\s*=`)
	params  = regexp.MustCompile(`function\s*[A-Za-z_]*\s*\(([^)]*)\)`)
	called  = regexp.MustCompile(`(^|[^\w.:'"])([A-Za-z_]\w*)\s*\(`)
	keyword = map[string]bool{"function": true, "if": true, "while": true, "return": true, "and": true, "or": true, "not": true, "elseif": true, "until": true, "in": true}
	comment = regexp.MustCompile(`--[^\n]*`)
)

// undefined lists the functions src calls before (or without) defining
// them: Redis would fail only when the call runs.
func undefined(src string) []string {
	src = comment.ReplaceAllString(src, "")
	def := map[string]int{} // name -> offset of its definition
	for _, m := range defined.FindAllStringSubmatchIndex(src, -1) {
		if m[2] >= 0 {
			if _, ok := def[src[m[2]:m[3]]]; !ok {
				def[src[m[2]:m[3]]] = m[0]
			}
			continue
		}
		for _, name := range strings.Split(src[m[4]:m[5]], ",") {
			if name = strings.TrimSpace(name); name != "" {
				if _, ok := def[name]; !ok {
					def[name] = m[0]
				}
			}
		}
	}
	for _, m := range params.FindAllStringSubmatch(src, -1) {
		for _, p := range strings.Split(m[1], ",") {
			if p = strings.TrimSpace(p); p != "" && p != "..." {
				def[p] = 0
			}
		}
	}
	missing := map[string]bool{}
	for _, m := range called.FindAllStringSubmatchIndex(src, -1) {
		name := src[m[4]:m[5]]
		if keyword[name] || builtins[name] {
			continue
		}
		if at, ok := def[name]; !ok || at > m[4] {
			missing[name] = true
		}
	}
	var out []string
	for name := range missing {
		out = append(out, name)
	}
	sort.Strings(out)
	return out
}

func TestEveryFunctionDefinedBeforeUse(t *testing.T) {
	for name, src := range scripts.All() {
		if missing := undefined(src); len(missing) > 0 {
			t.Errorf("%s calls %v, defined nowhere before the call", name, missing)
		}
		if strings.Contains(src, "-- uses:") && strings.Count(src, "local holdersKey") != 1 {
			t.Errorf("%s: keys.lua included %d times", name, strings.Count(src, "local holdersKey"))
		}
	}
	if got := undefined("local function a() return b() end\nlocal function b() end"); len(got) != 1 || got[0] != "b" {
		t.Errorf("the check misses a call before its definition: %v", got)
	}
}

func TestNoConstantLeftUnreplaced(t *testing.T) {
	for name, src := range scripts.All() {
		for _, c := range []string{"FENCE_FLOOR", "FENCE_TTL_MS", "BATCH", "SCAN_WAITERS", "SERVED_BASE"} {
			if strings.Contains(src, c) {
				t.Errorf("%s still names %s", name, c)
			}
		}
	}
}

// loadAll compiles every script on c.
func loadAll(t *testing.T, c *redis.Client) {
	t.Helper()
	for name, src := range scripts.All() {
		if err := c.ScriptLoad(context.Background(), src).Err(); err != nil {
			t.Errorf("%s does not load: %v", name, err)
		}
	}
}

func TestEveryScriptLoadsOnRedis(t *testing.T) {
	loadAll(t, redistest.Start(t).Client(t))
}

func TestEveryScriptLoadsOnMiniredis(t *testing.T) {
	m := miniredis.RunT(t)
	c := redis.NewClient(&redis.Options{Addr: m.Addr()})
	t.Cleanup(func() { c.Close() })
	loadAll(t, c)
}
