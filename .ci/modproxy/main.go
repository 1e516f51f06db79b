// Command modproxy publishes a module from a directory of this checkout into
// a file-based module proxy, so that the go command can fetch it with
// GOPROXY=file://<dir> as if it had been tagged and pushed. .ci/user-get uses
// it to check a release before its tags exist (docs/releasing.md).
//
//	go run ./.ci/modproxy -dir contrib/otel -version v0.1.0 -out /tmp/proxy
//
// writes, in the layout of https://go.dev/ref/mod#goproxy-protocol:
//
//	/tmp/proxy/github.com/fairlock/fairlock/contrib/otel/@v/list
//	/tmp/proxy/github.com/fairlock/fairlock/contrib/otel/@v/v0.1.0.info
//	/tmp/proxy/github.com/fairlock/fairlock/contrib/otel/@v/v0.1.0.mod
//	/tmp/proxy/github.com/fairlock/fairlock/contrib/otel/@v/v0.1.0.zip
//
// The zip follows https://go.dev/ref/mod#zip-files the way the go command's
// own CreateFromDir (golang.org/x/mod/zip) does: every file under the prefix
// <module>@<version>/, leaving out VCS directories, nested modules (any
// directory below the root with a go.mod), vendored packages, symbolic links
// and other irregular files; a file name the format forbids, a case-folding
// collision or a size over the limits is an error. In a git work tree it
// also leaves out what git ignores (build outputs such as *.test), as a tag
// would; untracked files that are not ignored are kept, so an uncommitted
// change can be checked before it is committed.
//
// Where it lives: .ci/ is a directory of the core module, but the go command
// skips directories whose names begin with a dot, so ./... (the README's and
// .ci/run's test and vet commands) does not build it, and an import path with
// a ".ci" element is not valid, so no one can import it: it is not part of the
// library's API. It imports the standard library only, so the core go.mod
// gains no requirement for it. (golang.org/x/mod/zip would do the zip part,
// but a requirement on x/mod would reach every user of the core module.)
package main

import (
	"archive/zip"
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"
)

// The limits of https://go.dev/ref/mod#zip-files.
const (
	maxZipFile = 500 << 20 // the zip, and the total size of its files
	maxGoMod   = 16 << 20
	maxLICENSE = 16 << 20
)

func main() {
	dir := flag.String("dir", ".", "the module's root directory (the one with its go.mod)")
	version := flag.String("version", "", "the version to publish, a canonical semantic version such as v0.1.0")
	out := flag.String("out", "", "the proxy directory to write to (GOPROXY=file://<out>)")
	stamp := flag.String("time", "", "the version's time in .info, RFC 3339 (default: now)")
	useGit := flag.Bool("git", true, "in a git work tree, leave out the files git ignores")
	verbose := flag.Bool("v", false, "list the files left out, and why")
	flag.Usage = func() {
		fmt.Fprintf(flag.CommandLine.Output(), "usage: modproxy -dir <module dir> -version <vX.Y.Z> -out <proxy dir>\n")
		flag.PrintDefaults()
	}
	flag.Parse()
	if *version == "" || *out == "" || flag.NArg() != 0 {
		flag.Usage()
		os.Exit(2)
	}
	t := time.Now().UTC()
	if *stamp != "" {
		var err error
		if t, err = time.Parse(time.RFC3339, *stamp); err != nil {
			fatalf("-time: %v", err)
		}
	}
	if err := publish(*dir, *version, *out, t.UTC().Truncate(time.Second), *useGit, *verbose); err != nil {
		fatalf("%v", err)
	}
}

func fatalf(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "modproxy: "+format+"\n", args...)
	os.Exit(1)
}

// file is one file of the module: its slash-separated path from the module
// root, and where it is on disk.
type file struct {
	rel, abs string
	size     int64
}

func publish(dir, version, out string, t time.Time, useGit, verbose bool) error {
	gomod, err := os.ReadFile(filepath.Join(dir, "go.mod"))
	if err != nil {
		return err
	}
	if len(gomod) > maxGoMod {
		return fmt.Errorf("%s: go.mod is larger than %d bytes", dir, maxGoMod)
	}
	mod, err := modulePath(gomod)
	if err != nil {
		return fmt.Errorf("%s/go.mod: %v", dir, err)
	}
	if err := checkModulePath(mod); err != nil {
		return fmt.Errorf("module path %q: %v", mod, err)
	}
	if err := checkVersion(mod, version); err != nil {
		return err
	}

	files, omitted, err := listFiles(dir, useGit)
	if err != nil {
		return err
	}
	if err := checkFiles(files); err != nil {
		return fmt.Errorf("%s@%s from %s: %v", mod, version, dir, err)
	}
	if verbose {
		for _, o := range omitted {
			fmt.Fprintf(os.Stderr, "modproxy: left out %s\n", o)
		}
	}

	var zbuf bytes.Buffer
	if err := writeZip(&zbuf, mod+"@"+version+"/", files, t); err != nil {
		return err
	}
	if zbuf.Len() > maxZipFile {
		return fmt.Errorf("%s@%s: the zip is larger than %d bytes", mod, version, maxZipFile)
	}

	escMod, escVer := escape(mod), escape(version)
	vdir := filepath.Join(out, filepath.FromSlash(escMod), "@v")
	if err := os.MkdirAll(vdir, 0o755); err != nil {
		return err
	}
	info, err := json.Marshal(struct {
		Version string
		Time    string
	}{version, t.Format(time.RFC3339)})
	if err != nil {
		return err
	}
	for name, data := range map[string][]byte{
		escVer + ".info": append(info, '\n'),
		escVer + ".mod":  gomod,
		escVer + ".zip":  zbuf.Bytes(),
	} {
		if err := os.WriteFile(filepath.Join(vdir, name), data, 0o644); err != nil {
			return err
		}
	}
	if err := addToList(filepath.Join(vdir, "list"), version); err != nil {
		return err
	}
	fmt.Printf("modproxy: %s@%s: %d files from %s (%d left out) into %s\n",
		mod, version, len(files), dir, len(omitted), vdir)
	return nil
}

var moduleLine = regexp.MustCompile(`^module\s+("(?:[^"\\]|\\.)*"|\S+)\s*$`)

// modulePath returns the path of the module directive of a go.mod file.
func modulePath(gomod []byte) (string, error) {
	for _, line := range strings.Split(string(gomod), "\n") {
		if i := strings.Index(line, "//"); i >= 0 {
			line = line[:i]
		}
		m := moduleLine.FindStringSubmatch(strings.TrimSpace(line))
		if m == nil {
			continue
		}
		if strings.HasPrefix(m[1], `"`) {
			return strconv.Unquote(m[1])
		}
		return m[1], nil
	}
	return "", errors.New("no module directive")
}

// checkModulePath applies the rules of golang.org/x/mod/module.CheckPath
// that a module path of this repository could break.
func checkModulePath(p string) error {
	if err := checkPath(p, importPathOK, false); err != nil {
		return err
	}
	first, _, _ := strings.Cut(p, "/")
	if !strings.Contains(first, ".") || strings.HasPrefix(first, "-") ||
		strings.ContainsFunc(first, func(r rune) bool {
			return !('a' <= r && r <= 'z' || '0' <= r && r <= '9' || r == '.' || r == '-')
		}) {
		return fmt.Errorf("first element %q is not a lower-case domain name", first)
	}
	return nil
}

// semver is a canonical semantic version, as the go command writes it: no
// build metadata, no leading zeros.
var semver = regexp.MustCompile(`^v(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)(?:-((?:0|[1-9][0-9]*|[0-9]*[A-Za-z-][0-9A-Za-z-]*)(?:\.(?:0|[1-9][0-9]*|[0-9]*[A-Za-z-][0-9A-Za-z-]*))*))?$`)

var majorSuffix = regexp.MustCompile(`/v([2-9]|[1-9][0-9]+)$`)

// checkVersion checks that version is canonical and agrees with the major
// version suffix of mod: v0 and v1 without one, vN with /vN for N >= 2.
func checkVersion(mod, version string) error {
	m := semver.FindStringSubmatch(version)
	if m == nil {
		return fmt.Errorf("version %q is not a canonical semantic version (like v1.2.3 or v1.2.3-rc.1)", version)
	}
	want := ""
	if m[1] != "0" && m[1] != "1" {
		want = "/v" + m[1]
	}
	got := ""
	if s := majorSuffix.FindStringSubmatch(mod); s != nil {
		got = "/v" + s[1]
	}
	if got != want {
		return fmt.Errorf("version %s does not fit module path %s: major version %s needs the suffix %q", version, mod, "v"+m[1], want)
	}
	return nil
}

// listFiles walks dir as CreateFromDir does and returns the files of the
// module, sorted, and what it left out.
func listFiles(dir string, useGit bool) (files []file, omitted []string, err error) {
	var keep map[string]bool
	if useGit {
		keep = gitFiles(dir)
	}
	err = filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(dir, p)
		if err != nil {
			return err
		}
		rel = filepath.ToSlash(rel)
		if d.IsDir() {
			if rel == "." {
				return nil
			}
			switch d.Name() {
			case ".bzr", ".git", ".hg", ".svn":
				omitted = append(omitted, rel+"/: version control")
				return filepath.SkipDir
			}
			if nested, err := hasGoMod(p); err != nil {
				return err
			} else if nested {
				omitted = append(omitted, rel+"/: a nested module")
				return filepath.SkipDir
			}
			return nil
		}
		switch {
		case isVendored(rel):
			omitted = append(omitted, rel+": vendored")
		case rel == ".hg_archival.txt":
			omitted = append(omitted, rel+": written by hg archive")
		case !d.Type().IsRegular():
			omitted = append(omitted, rel+": not a regular file")
		case keep != nil && !keep[rel]:
			omitted = append(omitted, rel+": ignored by git")
		default:
			info, err := d.Info()
			if err != nil {
				return err
			}
			files = append(files, file{rel: rel, abs: p, size: info.Size()})
		}
		return nil
	})
	sort.Slice(files, func(i, j int) bool { return files[i].rel < files[j].rel })
	return files, omitted, err
}

// hasGoMod reports whether dir holds a file whose name is go.mod in any
// case: the format allows no such file below the module root, so the go
// command takes the directory for another module's.
func hasGoMod(dir string) (bool, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return false, err
	}
	for _, e := range entries {
		if strings.EqualFold(e.Name(), "go.mod") && e.Type().IsRegular() {
			return true, nil
		}
	}
	return false, nil
}

// gitFiles returns the files below dir that git tracks or would track (not
// ignored), or nil if dir is not in a git work tree.
func gitFiles(dir string) map[string]bool {
	cmd := exec.Command("git", "ls-files", "-z", "--cached", "--others", "--exclude-standard")
	cmd.Dir = dir
	outb, err := cmd.Output()
	if err != nil {
		return nil
	}
	keep := make(map[string]bool)
	for _, name := range strings.Split(string(outb), "\x00") {
		if name != "" {
			keep[name] = true
		}
	}
	return keep
}

// isVendored reports whether the go command leaves name out of a module
// zip as part of a vendored package (the rule for modules at go 1.24 or
// later, golang.org/x/mod/zip's isVendoredPackage). This repository's
// modules all declare go 1.26.
func isVendored(name string) bool {
	if name == "vendor/modules.txt" {
		return true
	}
	var i int
	if strings.HasPrefix(name, "vendor/") {
		i = len("vendor/")
	} else if j := strings.Index(name, "/vendor/"); j >= 0 {
		i = j + len("/vendor/")
	} else {
		return false
	}
	return strings.Contains(name[i:], "/")
}

// checkFiles applies the rules of the zip format to the file list: valid
// file names, no two paths equal under case folding (a file and a directory
// included), go.mod only at the root and spelled so, and the size limits.
func checkFiles(files []file) error {
	var errs []string
	seen := make(collisions)
	var total int64
	for _, f := range files {
		if err := checkPath(f.rel, fileNameOK, true); err != nil {
			errs = append(errs, fmt.Sprintf("%s: invalid file name: %v", f.rel, err))
			continue
		}
		if strings.EqualFold(f.rel, "go.mod") && f.rel != "go.mod" {
			errs = append(errs, fmt.Sprintf("%s: go.mod must be spelled in lower case", f.rel))
		}
		if err := seen.check(f.rel, false); err != nil {
			errs = append(errs, err.Error())
		}
		total += f.size
		switch {
		case f.rel == "go.mod" && f.size > maxGoMod:
			errs = append(errs, fmt.Sprintf("go.mod is larger than %d bytes", maxGoMod))
		case f.rel == "LICENSE" && f.size > maxLICENSE:
			errs = append(errs, fmt.Sprintf("LICENSE is larger than %d bytes", maxLICENSE))
		}
	}
	if total > maxZipFile {
		errs = append(errs, fmt.Sprintf("the files total %d bytes, more than %d", total, maxZipFile))
	}
	if len(errs) > 0 {
		return errors.New(strings.Join(errs, "\n\t"))
	}
	return nil
}

// collisions maps the case-folded form of each path seen, of a file or of
// a directory holding one, to the path and whether it is a directory.
type collisions map[string]struct {
	path  string
	isDir bool
}

func (c collisions) check(p string, isDir bool) error {
	key := fold(p)
	if other, ok := c[key]; ok {
		switch {
		case other.path != p:
			return fmt.Errorf("case-insensitive file name collision: %q and %q", other.path, p)
		case other.isDir != isDir:
			return fmt.Errorf("%q is both a file and a directory", p)
		case !isDir:
			return fmt.Errorf("%q appears twice", p)
		}
		return nil // a directory seen before, its parents with it
	}
	c[key] = struct {
		path  string
		isDir bool
	}{p, isDir}
	if parent := path.Dir(p); parent != "." {
		return c.check(parent, true)
	}
	return nil
}

// checkPath applies golang.org/x/mod/module's rules for a slash-separated
// import path (isFile false) or file path (isFile true) whose characters
// are checked by ok.
func checkPath(p string, ok func(rune) bool, isFile bool) error {
	if !utf8.ValidString(p) {
		return errors.New("invalid UTF-8")
	}
	if p == "" {
		return errors.New("empty path")
	}
	if p[0] == '-' && !isFile {
		return errors.New("leading dash")
	}
	if strings.Contains(p, "//") || strings.HasPrefix(p, "/") || strings.HasSuffix(p, "/") {
		return errors.New("empty path element")
	}
	for _, elem := range strings.Split(p, "/") {
		if strings.Count(elem, ".") == len(elem) {
			return fmt.Errorf("invalid path element %q", elem)
		}
		if elem[0] == '.' && !isFile {
			return fmt.Errorf("leading dot in path element %q", elem)
		}
		if elem[len(elem)-1] == '.' {
			return fmt.Errorf("trailing dot in path element %q", elem)
		}
		if i := strings.IndexFunc(elem, func(r rune) bool { return !ok(r) }); i >= 0 {
			r, _ := utf8.DecodeRuneInString(elem[i:])
			return fmt.Errorf("invalid character %q in %q", r, elem)
		}
		short, _, _ := strings.Cut(elem, ".")
		for _, bad := range windowsReserved {
			if strings.EqualFold(short, bad) {
				return fmt.Errorf("%q is a reserved name on Windows", short)
			}
		}
	}
	return nil
}

var windowsReserved = strings.Fields("CON PRN AUX NUL COM1 COM2 COM3 COM4 COM5 COM6 COM7 COM8 COM9 LPT1 LPT2 LPT3 LPT4 LPT5 LPT6 LPT7 LPT8 LPT9")

// importPathOK reports whether r may appear in an element of a module path.
func importPathOK(r rune) bool {
	return '0' <= r && r <= '9' || 'A' <= r && r <= 'Z' || 'a' <= r && r <= 'z' || strings.ContainsRune("-._~", r)
}

// fileNameOK reports whether r may appear in an element of a file path.
func fileNameOK(r rune) bool {
	if r < utf8.RuneSelf {
		return '0' <= r && r <= '9' || 'A' <= r && r <= 'Z' || 'a' <= r && r <= 'z' ||
			strings.ContainsRune("!#$%&()+,-.=@[]^_{}~ ", r)
	}
	return unicode.IsLetter(r)
}

// fold maps s to a form shared by all strings equal to it under Unicode
// simple case folding: each rune becomes the smallest of its fold orbit.
func fold(s string) string {
	var b strings.Builder
	for _, r := range s {
		min := r
		for f := unicode.SimpleFold(r); f != r; f = unicode.SimpleFold(f) {
			if f < min {
				min = f
			}
		}
		b.WriteRune(min)
	}
	return b.String()
}

// escape applies the proxy protocol's case encoding: each upper-case letter
// becomes '!' and the letter in lower case.
func escape(s string) string {
	var b strings.Builder
	for _, r := range s {
		if 'A' <= r && r <= 'Z' {
			b.WriteByte('!')
			r += 'a' - 'A'
		}
		b.WriteRune(r)
	}
	return b.String()
}

func writeZip(w io.Writer, prefix string, files []file, t time.Time) error {
	zw := zip.NewWriter(w)
	for _, f := range files {
		h := &zip.FileHeader{Name: prefix + f.rel, Method: zip.Deflate, Modified: t}
		fw, err := zw.CreateHeader(h)
		if err != nil {
			return err
		}
		r, err := os.Open(f.abs)
		if err != nil {
			return err
		}
		n, err := io.Copy(fw, r)
		r.Close()
		if err != nil {
			return fmt.Errorf("%s: %v", f.abs, err)
		}
		if n != f.size {
			return fmt.Errorf("%s changed while it was read (%d bytes, then %d)", f.abs, f.size, n)
		}
	}
	return zw.Close()
}

// addToList adds version to a proxy's list file, one version a line, in
// semantic version order.
func addToList(name, version string) error {
	data, err := os.ReadFile(name)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	versions := []string{version}
	for _, v := range strings.Fields(string(data)) {
		if v != version {
			versions = append(versions, v)
		}
	}
	sort.Slice(versions, func(i, j int) bool { return compareSemver(versions[i], versions[j]) < 0 })
	return os.WriteFile(name, []byte(strings.Join(versions, "\n")+"\n"), 0o644)
}

// compareSemver orders canonical semantic versions by the rules of
// https://semver.org (section 11); anything else sorts first, by text.
func compareSemver(a, b string) int {
	ma, mb := semver.FindStringSubmatch(a), semver.FindStringSubmatch(b)
	if ma == nil || mb == nil {
		switch {
		case ma != nil:
			return 1
		case mb != nil:
			return -1
		}
		return strings.Compare(a, b)
	}
	for i := 1; i <= 3; i++ {
		if c := compareNumbers(ma[i], mb[i]); c != 0 {
			return c
		}
	}
	pa, pb := ma[4], mb[4]
	switch {
	case pa == pb:
		return 0
	case pa == "":
		return 1 // a release follows its pre-releases
	case pb == "":
		return -1
	}
	ia, ib := strings.Split(pa, "."), strings.Split(pb, ".")
	for k := 0; k < len(ia) && k < len(ib); k++ {
		na, nb := isNumber(ia[k]), isNumber(ib[k])
		var c int
		switch {
		case na && nb:
			c = compareNumbers(ia[k], ib[k])
		case na:
			c = -1
		case nb:
			c = 1
		default:
			c = strings.Compare(ia[k], ib[k])
		}
		if c != 0 {
			return c
		}
	}
	return len(ia) - len(ib)
}

func isNumber(s string) bool {
	return s != "" && strings.Trim(s, "0123456789") == ""
}

// compareNumbers compares decimal numbers without leading zeros, of any
// length.
func compareNumbers(a, b string) int {
	if len(a) != len(b) {
		return len(a) - len(b)
	}
	return strings.Compare(a, b)
}
