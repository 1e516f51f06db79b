package fairlock_test

import (
	"bytes"
	"flag"
	"go/ast"
	"go/parser"
	"go/printer"
	"go/token"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
)

var updateAPI = flag.Bool("update-api", false, "write the exported API to testdata/api.txt")

// The exported API of package fairlock and package fairlocktest, as
// testdata/api.txt records it: a change to it is deliberate, and goes into
// the CHANGELOG. After one, run
//
//	go test -run TestAPI ./fairlock/ -update-api
func TestAPI(t *testing.T) {
	t.Parallel()
	got := exportedAPI(t, ".") + "\n" + exportedAPI(t, "fairlocktest")
	if *updateAPI {
		if err := os.WriteFile("testdata/api.txt", []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile("testdata/api.txt")
	if err != nil {
		t.Fatal(err)
	}
	if got != string(want) {
		t.Errorf("the exported API is not testdata/api.txt's; if the change is meant, run with -update-api and say so in the CHANGELOG:\n%s",
			lineDiff(string(want), got))
	}
}

// exportedAPI prints the exported declarations of the package in dir,
// without bodies, comments or unexported fields, one to a block, sorted.
func exportedAPI(t *testing.T, dir string) string {
	fset := token.NewFileSet()
	paths, err := filepath.Glob(filepath.Join(dir, "*.go"))
	if err != nil {
		t.Fatal(err)
	}
	var blocks []string
	print := func(name string, node any) {
		var b bytes.Buffer
		if err := printer.Fprint(&b, fset, node); err != nil {
			t.Fatal(err)
		}
		blocks = append(blocks, name+": "+b.String())
	}
	for _, path := range paths {
		if strings.HasSuffix(path, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, path, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range f.Decls {
			switch d := d.(type) {
			case *ast.FuncDecl:
				if d.Name.IsExported() && (d.Recv == nil || ast.IsExported(receiver(d))) {
					d.Body = nil
					print(f.Name.Name, d)
				}
			case *ast.GenDecl:
				// A group of constants stays one block: iota counts in
				// its order.
				var specs []ast.Spec
				for _, s := range d.Specs {
					if spec := exportedSpec(s); spec != nil {
						specs = append(specs, spec)
					}
				}
				for i := range specs {
					if d.Tok == token.CONST {
						print(f.Name.Name, &ast.GenDecl{Tok: d.Tok, Lparen: 1, Specs: specs})
						break
					}
					print(f.Name.Name, &ast.GenDecl{Tok: d.Tok, Specs: specs[i : i+1]})
				}
			}
		}
	}
	sort.Strings(blocks)
	return strings.Join(blocks, "\n")
}

// receiver is the name of a method's receiver type.
func receiver(d *ast.FuncDecl) string {
	switch r := d.Recv.List[0].Type.(type) {
	case *ast.StarExpr:
		return r.X.(*ast.Ident).Name
	case *ast.Ident:
		return r.Name
	}
	return ""
}

// exportedSpec is s with only its exported parts, or nil if it has none.
// A constant keeps its value, whose change users see too.
func exportedSpec(s ast.Spec) ast.Spec {
	switch s := s.(type) {
	case *ast.TypeSpec:
		if !s.Name.IsExported() {
			return nil
		}
		if st, ok := s.Type.(*ast.StructType); ok {
			var fields []*ast.Field
			for _, f := range st.Fields.List {
				if len(f.Names) > 0 && f.Names[0].IsExported() {
					fields = append(fields, f)
				}
			}
			st.Fields.List = fields
		}
		return s
	case *ast.ValueSpec:
		for _, n := range s.Names {
			if n.IsExported() {
				return s
			}
		}
	}
	return nil
}

// lineDiff lists the lines of want missing from got (-) and those of got
// not in want (+).
func lineDiff(want, got string) string {
	in := func(s string) map[string]bool {
		m := map[string]bool{}
		for _, l := range strings.Split(s, "\n") {
			m[l] = true
		}
		return m
	}
	w, g := in(want), in(got)
	var out []string
	for _, l := range strings.Split(want, "\n") {
		if !g[l] {
			out = append(out, "- "+l)
		}
	}
	for _, l := range strings.Split(got, "\n") {
		if !w[l] {
			out = append(out, "+ "+l)
		}
	}
	return strings.Join(out, "\n")
}
