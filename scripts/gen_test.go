package scripts_test

import (
	"flag"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/fairlock/fairlock/scripts"
)

var update = flag.Bool("update", false, "write the assembled scripts into gen/")

// regenerate is the command that writes gen/ anew, for the failures to
// name.
const regenerate = "go generate ./scripts/ (or go test ./scripts/ -run TestGenerated -update)"

// Every script as Redis runs it is checked in at gen/<name>.lua, byte for
// byte (names as All gives them: gen/lock/acquire.lua, gen/renew.lua), so
// that a Redis error's user_script:N is line N of that file, and a review
// sees what a change to lib/ does to each script. The test fails when a
// file is not what the code assembles now, or names no script.
func TestGenerated(t *testing.T) {
	want := map[string]string{}
	for name, src := range scripts.All() {
		want[filepath.Join("gen", filepath.FromSlash(name)+".lua")] = src
	}
	have := generatedFiles(t)
	if *update {
		writeGenerated(t, want, have)
		return
	}
	for path, src := range want {
		got, err := os.ReadFile(path)
		if err != nil {
			t.Errorf("%s is missing; run %s", path, regenerate)
			continue
		}
		if line, ok := firstDifference(string(got), src); !ok {
			t.Errorf("%s differs from the script assembled now from line %d; run %s", path, line, regenerate)
		}
	}
	for _, path := range have {
		if _, ok := want[path]; !ok {
			t.Errorf("%s is no script's; run %s", path, regenerate)
		}
	}
}

// generatedFiles lists the .lua files under gen/.
func generatedFiles(t *testing.T) []string {
	t.Helper()
	var paths []string
	err := filepath.WalkDir("gen", func(path string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() && strings.HasSuffix(path, ".lua") {
			paths = append(paths, path)
		}
		if os.IsNotExist(err) {
			return nil // nothing generated yet
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return paths
}

// writeGenerated writes want's files and removes those of have that no
// script has any more.
func writeGenerated(t *testing.T, want map[string]string, have []string) {
	t.Helper()
	for _, path := range have {
		if _, ok := want[path]; !ok {
			if err := os.Remove(path); err != nil {
				t.Fatal(err)
			}
		}
	}
	for path, src := range want {
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(src), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// firstDifference returns the first line (from 1) at which got and want
// differ, and whether they are the same.
func firstDifference(got, want string) (int, bool) {
	if got == want {
		return 0, true
	}
	g, w := strings.Split(got, "\n"), strings.Split(want, "\n")
	for i := range min(len(g), len(w)) {
		if g[i] != w[i] {
			return i + 1, false
		}
	}
	return min(len(g), len(w)) + 1, false
}
