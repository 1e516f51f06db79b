package scripts_test

import (
	"context"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/alicebob/miniredis/v2"
	"github.com/fairlock/fairlock/internal/redistest"
	"github.com/fairlock/fairlock/scripts"
	"github.com/redis/go-redis/v9"
	"github.com/yuin/gopher-lua/ast"
	"github.com/yuin/gopher-lua/parse"
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

// topLevel matches a line that starts a top-level definition of a module.
var topLevel = regexp.MustCompile(`(?m)^local function ([A-Za-z_]\w*)|^local ([A-Za-z_][\w, ]*?)\s*(?:=|$)`)

// A script carries only what it runs: every function or variable that a
// script defines at its top level, but for lib/keys.lua's (which every
// script of a store gets whole), is named as an identifier by a statement
// after it, as gopher-lua parses the script: a field like redis.call does
// not name a local call.
func TestEveryScriptCarriesOnlyWhatItRuns(t *testing.T) {
	keysLua := keysLuaNames(t)
	carriesOnlyWhatItRuns(t, scripts.All(), keysLua)
	for src, want := range map[string]string{
		"local function call() end\nreturn redis.call('GET', 'k')":      "call",
		"local function never() return 1 end\n" + scripts.Mutex.Release: "never",
		"local a = 1\nlocal a = 2\nreturn a":                            "a",
		"local function f() return f() end\nlocal g = 1\nreturn g":      "f",
	} {
		if got, err := unused(src, keysLua); err != nil || !slices.Equal(got, []string{want}) {
			t.Errorf("the check finds %v unused (%v), not [%s], in %q", got, err, want, src[:min(len(src), 60)])
		}
	}
}

// keysLuaNames are the names lib/keys.lua defines for every script of a
// store.
func keysLuaNames(t *testing.T) map[string]bool {
	t.Helper()
	keys, err := os.ReadFile("lib/keys.lua")
	if err != nil {
		t.Fatal(err)
	}
	names, err := topLevelNames(string(keys))
	if err != nil {
		t.Fatal(err)
	}
	return names
}

// carriesOnlyWhatItRuns fails t for each top-level local of a script of
// all (by All's names) that nothing after it names, but lib/keys.lua's.
func carriesOnlyWhatItRuns(t *testing.T, all map[string]string, keysLua map[string]bool) {
	t.Helper()
	for name, src := range all {
		skip := keysLua
		if !strings.Contains(name, "/") {
			skip = nil // it stands alone, without lib/keys.lua
		}
		got, err := unused(src, skip)
		if err != nil {
			t.Errorf("%s does not parse: %v", name, err)
		}
		for _, n := range got {
			t.Errorf("%s defines %s and never uses it", name, n)
		}
	}
}

// topLevelNames lists the names src's top-level locals define.
func topLevelNames(src string) (map[string]bool, error) {
	chunk, err := parse.Parse(strings.NewReader(src), "src")
	names := map[string]bool{}
	for _, s := range chunk {
		if local, ok := s.(*ast.LocalAssignStmt); ok {
			for _, n := range local.Names {
				names[n] = true
			}
		}
	}
	return names, err
}

// unused lists, in order, the top-level locals of src, but those of skip,
// that no statement after their definition names before a top-level local
// defines the name anew (whose value's names count). A name is one an
// identifier says: locals of inner scopes that hide a top-level one are
// not told apart from it.
func unused(src string, skip map[string]bool) ([]string, error) {
	chunk, err := parse.Parse(strings.NewReader(src), "script")
	if err != nil {
		return nil, err
	}
	named := make([]map[string]bool, len(chunk)) // by each statement
	for i, s := range chunk {
		named[i] = map[string]bool{}
		identifiers(reflect.ValueOf(s), named[i])
	}
	var out []string
	for i, s := range chunk {
		local, ok := s.(*ast.LocalAssignStmt)
		if !ok {
			continue
		}
		for _, n := range local.Names {
			if !skip[n] && !namedAfter(chunk[i+1:], named[i+1:], n) {
				out = append(out, n)
			}
		}
	}
	return out, nil
}

// namedAfter tells whether one of stmts, whose identifiers are named, names
// n before a top-level local defines n anew.
func namedAfter(stmts []ast.Stmt, named []map[string]bool, n string) bool {
	for i, s := range stmts {
		if named[i][n] {
			return true
		}
		if local, ok := s.(*ast.LocalAssignStmt); ok && slices.Contains(local.Names, n) {
			return false
		}
	}
	return false
}

// identifiers adds to names the name of every identifier in v, a node of
// gopher-lua's AST or part of one. The AST has no walker of its own, and
// reflection reaches every kind of node alike, so that none is missed;
// only exported fields hold nodes.
func identifiers(v reflect.Value, names map[string]bool) {
	switch v.Kind() {
	case reflect.Pointer, reflect.Interface:
		if v.IsNil() {
			return
		}
		if id, ok := v.Interface().(*ast.IdentExpr); ok {
			names[id.Value] = true
			return
		}
		identifiers(v.Elem(), names)
	case reflect.Slice:
		for i := range v.Len() {
			identifiers(v.Index(i), names)
		}
	case reflect.Struct:
		for i := range v.NumField() {
			if v.Type().Field(i).IsExported() {
				identifiers(v.Field(i), names)
			}
		}
	}
}

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
