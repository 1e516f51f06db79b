// Command modproxy publishes a module from a directory of this checkout into
// a file-based module proxy, so that the go command can fetch it with
// GOPROXY=file://<dir> as if it had been tagged and pushed. .ci/user-get uses
// it to check a release before its tags exist (docs/releasing.md).
//
//	go -C .ci/modproxy run . -dir ../../contrib/otel -version v0.1.0 -out /tmp/proxy
//
// writes, in the layout of https://go.dev/ref/mod#goproxy-protocol:
//
//	/tmp/proxy/github.com/fairlock/fairlock/contrib/otel/@v/list
//	/tmp/proxy/github.com/fairlock/fairlock/contrib/otel/@v/v0.1.0.info
//	/tmp/proxy/github.com/fairlock/fairlock/contrib/otel/@v/v0.1.0.mod
//	/tmp/proxy/github.com/fairlock/fairlock/contrib/otel/@v/v0.1.0.zip
//
// The zip is the go command's own (golang.org/x/mod/zip), with one step
// before it: in a git work tree, the files git ignores (build outputs such as
// *.test) are left out, as a tag would leave them out; untracked files that
// are not ignored are kept, so that an uncommitted change can be checked
// before it is committed. x/mod/zip then leaves out nested modules, vendored
// packages and symbolic links, and rejects what the format forbids. Outside
// a git work tree, or with -git=false, it zips the whole directory as
// CreateFromDir does.
//
// Where it lives: .ci/modproxy is a module of its own, so that its
// requirement on golang.org/x/mod stays out of the core module's go.mod,
// where it would reach every user of the library. Its go.mod also leaves this
// directory out of the core module (and out of its zip), and the core's
// ./... skips .ci/ anyway. No one fetches it: its module path names no
// directory of the repository, and nothing imports it.
package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"golang.org/x/mod/modfile"
	"golang.org/x/mod/module"
	"golang.org/x/mod/semver"
	"golang.org/x/mod/zip"
)

func main() {
	dir := flag.String("dir", ".", "the module's root directory (the one with its go.mod)")
	version := flag.String("version", "", "the version to publish, a canonical semantic version such as v0.1.0")
	out := flag.String("out", "", "the proxy directory to write to (GOPROXY=file://<out>)")
	stamp := flag.String("time", "", "the version's time in .info, RFC 3339 (default: now)")
	useGit := flag.Bool("git", true, "in a git work tree, leave out the files git ignores")
	verbose := flag.Bool("v", false, "list the files the zip format leaves out, and why (not those git ignores)")
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

func publish(dir, version, out string, t time.Time, useGit, verbose bool) error {
	gomod, err := os.ReadFile(filepath.Join(dir, "go.mod"))
	if err != nil {
		return err
	}
	m := module.Version{Path: modfile.ModulePath(gomod), Version: version}
	if m.Path == "" {
		return fmt.Errorf("%s/go.mod: no module directive", dir)
	}
	// The zip is made first: it checks the module path and the version,
	// which the other files' names are made of.
	var zbuf bytes.Buffer
	cf, err := zipModule(&zbuf, m, dir, useGit)
	if err != nil {
		return fmt.Errorf("%s from %s: %v", m, dir, err)
	}
	if verbose {
		for _, o := range cf.Omitted {
			fmt.Fprintf(os.Stderr, "modproxy: left out %s: %v\n", o.Path, o.Err)
		}
	}
	vdir, err := writeVersion(out, m, t, gomod, zbuf.Bytes())
	if err != nil {
		return err
	}
	fmt.Printf("modproxy: %s: %d files from %s (%d left out by the zip format) into %s\n",
		m, len(cf.Valid), dir, len(cf.Omitted), vdir)
	return nil
}

// writeVersion writes m's .info, .mod and .zip files into the proxy
// directory out, adds m.Version to its list, and returns the directory
// of these files.
func writeVersion(out string, m module.Version, t time.Time, gomod, zipData []byte) (string, error) {
	escMod, err := module.EscapePath(m.Path)
	if err != nil {
		return "", err
	}
	escVer, err := module.EscapeVersion(m.Version)
	if err != nil {
		return "", err
	}
	vdir := filepath.Join(out, filepath.FromSlash(escMod), "@v")
	if err := os.MkdirAll(vdir, 0o755); err != nil {
		return "", err
	}
	info, err := json.Marshal(struct {
		Version string
		Time    string
	}{m.Version, t.Format(time.RFC3339)})
	if err != nil {
		return "", err
	}
	for name, data := range map[string][]byte{
		escVer + ".info": append(info, '\n'),
		escVer + ".mod":  gomod,
		escVer + ".zip":  zipData,
	} {
		if err := os.WriteFile(filepath.Join(vdir, name), data, 0o644); err != nil {
			return "", err
		}
	}
	if err := addToList(filepath.Join(vdir, "list"), m.Version); err != nil {
		return "", err
	}
	return vdir, nil
}

// zipModule writes the zip of m, made from dir, to w, and returns what it
// holds and what it leaves out.
func zipModule(w io.Writer, m module.Version, dir string, useGit bool) (zip.CheckedFiles, error) {
	var files []zip.File
	inGit := false
	if useGit {
		var err error
		if files, inGit, err = gitFiles(dir); err != nil {
			return zip.CheckedFiles{}, err
		}
	}
	if !inGit {
		cf, err := zip.CheckDir(dir)
		if err != nil {
			return cf, err
		}
		return cf, zip.CreateFromDir(w, m, dir)
	}
	cf, err := zip.CheckFiles(files)
	if err != nil {
		return cf, err
	}
	return cf, zip.Create(w, m, files)
}

// gitFiles returns the files below dir that git tracks or would track (not
// ignored) and that are on disk. inGit is false if git cannot list them:
// dir is not in a git work tree, or there is no git.
func gitFiles(dir string) (files []zip.File, inGit bool, err error) {
	cmd := exec.Command("git", "ls-files", "-z", "--cached", "--others", "--exclude-standard")
	cmd.Dir = dir
	out, err := cmd.Output()
	if err != nil {
		return nil, false, nil
	}
	for _, name := range strings.Split(string(out), "\x00") {
		// A name ending in a slash is an untracked repository inside this
		// one: git lists none of its files, so none is kept.
		if name == "" || strings.HasSuffix(name, "/") {
			continue
		}
		p := filepath.Join(dir, filepath.FromSlash(name))
		info, err := os.Lstat(p)
		if errors.Is(err, fs.ErrNotExist) {
			continue // tracked, but deleted from the work tree
		}
		if err != nil {
			return nil, true, err
		}
		files = append(files, diskFile{name, p, info})
	}
	return files, true, nil
}

// diskFile is a zip.File on disk: its slash-separated path from the module
// root, where it is, and what Lstat said of it when it was listed.
type diskFile struct {
	rel, abs string
	info     fs.FileInfo
}

func (f diskFile) Path() string                 { return f.rel }
func (f diskFile) Lstat() (fs.FileInfo, error)  { return f.info, nil }
func (f diskFile) Open() (io.ReadCloser, error) { return os.Open(f.abs) }

// addToList adds version to a proxy's list file, one version a line, in
// semantic version order.
func addToList(name, version string) error {
	data, err := os.ReadFile(name)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	versions := strings.Fields(string(data))
	if !slices.Contains(versions, version) {
		versions = append(versions, version)
	}
	semver.Sort(versions)
	return os.WriteFile(name, []byte(strings.Join(versions, "\n")+"\n"), 0o644)
}
