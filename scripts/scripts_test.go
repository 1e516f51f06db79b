package scripts_test

import (
	"context"
	"os"
	"path/filepath"
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
		if want := strings.Count(name, "/"); strings.Count(src, "local holdersKey") != want {
			t.Errorf("%s: keys.lua included %d times, want %d", name, strings.Count(src, "local holdersKey"), want)
		}
	}
	if got := undefined("local function a() return b() end\nlocal function b() end"); len(got) != 1 || got[0] != "b" {
		t.Errorf("the check misses a call before its definition: %v", got)
	}
}

var (
	topLevel = regexp.MustCompile(`(?m)^local function ([A-Za-z_]\w*)|^local ([A-Za-z_][\w, ]*?)\s*(?:=|$)`)
	literal  = regexp.MustCompile(`--[^\n]*|'[^'\n]*'|"[^"\n]*"`)
)

// A script carries only what it runs: every function or variable that a
// script defines at its top level, but for lib/keys.lua's, is named
// somewhere else in it.
func TestEveryScriptCarriesOnlyWhatItRuns(t *testing.T) {
	for name, src := range scripts.All() {
		code := literal.ReplaceAllString(src, "")
		for _, m := range topLevel.FindAllStringSubmatch(code, -1) {
			names := []string{m[1]}
			if m[1] == "" {
				names = strings.Split(m[2], ",")
			}
			for _, n := range names {
				n = strings.TrimSpace(n)
				if keysLua[n] {
					continue
				}
				if uses := regexp.MustCompile(`\b`+n+`\b`).FindAllStringIndex(code, -1); len(uses) < 2 {
					t.Errorf("%s defines %s and never uses it", name, n)
				}
			}
		}
	}
}

// keysLua are the names lib/keys.lua defines for every script.
var keysLua = map[string]bool{"holdersKey": true, "queueKey": true, "orderKey": true, "fenceKey": true, "metaKey": true,
	"stateKey": true, "sessionPrefix": true, "notifyCmd": true, "notifyPrefix": true, "keepTTL": true}

func TestNoConstantLeftUnreplaced(t *testing.T) {
	for name, src := range scripts.All() {
		for _, c := range []string{"FENCE_TTL_MS", "BATCH", "SCAN_WAITERS",
			"ERR_SESSION_GONE", "ERR_WITHDRAWN", "ERR_WAITERS_FIRST", "ERR_CAPACITY", "WAITERS_KEY_SUFFIX", "IDLE_GROUPS", "DEFAULT_AGING_MS"} {
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

// Every line of lib's modules is a comment, a blank line, or part of a
// top-level definition that scripts.go can carry whole: anything else
// would be left out of the scripts (or run where it should not).
func TestModulesAreDefinitionsOnly(t *testing.T) {
	paths, _ := filepath.Glob("lib/*.lua")
	more, _ := filepath.Glob("lib/*/*.lua")
	for _, path := range append(paths, more...) {
		if strings.HasSuffix(path, "keys.lua") {
			continue
		}
		src, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		inside := false
		for i, line := range strings.Split(string(src), "\n") {
			switch {
			case inside:
				inside = line != "end"
			case strings.HasPrefix(line, "local function "):
				inside = !strings.HasSuffix(line, " end")
			case line == "", strings.HasPrefix(line, "--"), topLevel.MatchString(line):
			default:
				t.Errorf("%s:%d: %q is neither a definition nor a comment", path, i+1, line)
			}
		}
	}
}

func TestEveryScriptLoadsOnMiniredis(t *testing.T) {
	m := miniredis.RunT(t)
	c := redis.NewClient(&redis.Options{Addr: m.Addr()})
	t.Cleanup(func() { c.Close() })
	loadAll(t, c)
}
