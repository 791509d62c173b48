package inbox_test

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// TestArchitectureNamesExist keeps docs/ARCHITECTURE.md true to the code:
// every identifier it attributes to code must be declared there. The doc
// attributes a backquoted identifier to code in three ways:
//
//   - `pkg.Name` (or `pkg.Name(…)`, `*pkg.Name`), where pkg is the name of
//     a package of this module and Name is not a file extension (`inbox.json`
//     is a file): Name is declared in that package;
//   - spool's `name` (any package of this module followed by 's): name is
//     declared in that package;
//   - `Name` (dir/file.go): Name is declared in the package in dir.
//
// Declared means a top-level function, method, type, variable or constant
// of the package's non-test files (go/parser, no type checking). A
// renamed or removed function the doc still names fails the test; so does
// a doc that names a package that no longer exists.
func TestArchitectureNamesExist(t *testing.T) {
	doc, err := os.ReadFile(filepath.Join("docs", "ARCHITECTURE.md"))
	if err != nil {
		t.Fatal(err)
	}
	dirs := packageDirs(t) // package name → its directories
	declared := map[string]map[string]bool{}
	decls := func(dir string) map[string]bool {
		if declared[dir] == nil {
			declared[dir] = declaredNames(t, dir)
		}
		return declared[dir]
	}
	inPackage := func(pkg, name string) (bool, bool) {
		ds, ok := dirs[pkg]
		if !ok {
			return false, false
		}
		for _, d := range ds {
			if decls(d)[name] {
				return true, true
			}
		}
		return false, true
	}
	text := string(doc)
	checked := 0
	ident := `[A-Za-z_][A-Za-z0-9_]*`
	qualified := regexp.MustCompile("`\\*?(" + ident + `)\.(` + ident + ")(?:\\([^`]*\\))?`")
	for _, m := range qualified.FindAllStringSubmatch(text, -1) {
		if fileExt[m[2]] {
			continue
		}
		if found, isPkg := inPackage(m[1], m[2]); isPkg {
			checked++
			if !found {
				t.Errorf("ARCHITECTURE.md names %s, which package %s does not declare", m[0], m[1])
			}
		}
	}
	possessive := regexp.MustCompile("(" + ident + ")'s `(" + ident + ")`")
	for _, m := range possessive.FindAllStringSubmatch(text, -1) {
		if found, isPkg := inPackage(m[1], m[2]); isPkg {
			checked++
			if !found {
				t.Errorf("ARCHITECTURE.md names %s, which package %s does not declare", m[0], m[1])
			}
		}
	}
	located := regexp.MustCompile("`(" + ident + ")` \\(([a-z0-9_/]+)/[a-z0-9_]+\\.go\\)")
	for _, m := range located.FindAllStringSubmatch(text, -1) {
		checked++
		if !decls(filepath.FromSlash(m[2]))[m[1]] {
			t.Errorf("ARCHITECTURE.md names %s, which %s does not declare", m[0], m[2])
		}
	}
	t.Logf("checked %d names", checked)
	if checked < 10 {
		t.Errorf("checked %d names in ARCHITECTURE.md; the rules above should find more: has the doc's form changed?", checked)
	}
}

// fileExt are the extensions of the files the doc names.
var fileExt = map[string]bool{"json": true, "go": true, "md": true, "log": true, "lock": true, "token": true, "txt": true, "txtar": true}

// packageDirs maps each package name of the module (its non-test files)
// to the directories that hold it; "inbox" is the root.
func packageDirs(t *testing.T) map[string][]string {
	t.Helper()
	out := map[string][]string{}
	err := filepath.WalkDir(".", func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if n := d.Name(); p != "." && (strings.HasPrefix(n, ".") || n == "testdata") {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(p, ".go") || strings.HasSuffix(p, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(token.NewFileSet(), p, nil, parser.PackageClauseOnly)
		if err != nil {
			return nil
		}
		dir, pkg := filepath.Dir(p), f.Name.Name
		for _, d := range out[pkg] {
			if d == dir {
				return nil
			}
		}
		out[pkg] = append(out[pkg], dir)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// declaredNames lists the top-level names of the non-test files in dir:
// functions, methods, types, variables and constants.
func declaredNames(t *testing.T, dir string) map[string]bool {
	t.Helper()
	out := map[string]bool{}
	entries, err := os.ReadDir(dir)
	if err != nil {
		return out // no such directory: nothing is declared there
	}
	fset := token.NewFileSet()
	for _, e := range entries {
		n := e.Name()
		if e.IsDir() || !strings.HasSuffix(n, ".go") || strings.HasSuffix(n, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, filepath.Join(dir, n), nil, parser.SkipObjectResolution)
		if err != nil {
			t.Fatalf("parse %s: %v", filepath.Join(dir, n), err)
		}
		for _, d := range f.Decls {
			switch d := d.(type) {
			case *ast.FuncDecl:
				out[d.Name.Name] = true
			case *ast.GenDecl:
				for _, s := range d.Specs {
					switch s := s.(type) {
					case *ast.TypeSpec:
						out[s.Name.Name] = true
					case *ast.ValueSpec:
						for _, id := range s.Names {
							out[id.Name] = true
						}
					}
				}
			}
		}
	}
	return out
}
