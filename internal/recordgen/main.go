// Command recordgen writes the JSON encoders and decoders of a package's
// record types, from their struct tags, on top of internal/jsonrec:
//
//	//go:generate go run ../internal/recordgen -out records_gen.go Thread Message
//
// It runs in the package's directory (as go generate does) and reads its
// source, and the source of the module's packages it embeds types from.
// Each named type, and each struct type of the package they contain, gets
// an encoder and a decoder with encoding/json's output and semantics
// (field order, omitempty, embedded fields promoted, pointers, slices of
// records, []string, map[string]int, json.RawMessage). Other field types
// are refused.
//
// What the generated code says of a type is its members, once for
// writing and once for reading; how a member of each kind is written and
// read is internal/jsonrec's, hand-written and tested once. Exported types
// get the methods AppendJSON, AppendJSONMembers, ReadJSON, ReadJSONMember
// and DecodeJSON; unexported ones appendJSON, appendJSONMembers,
// readJSONMember and decodeJSON; every type a function jsonRead<Type>.
// The Members methods write and read the members without the braces, so
// that a record embedding another (spool's log line embeds inbox.Event)
// calls them instead of repeating the embedded record's code: that is
// done when all the embedded record's members stand in the outer one and
// it has a codec, of this package or named on its own package's
// go:generate line.
//
// The generated file is checked in; TestGeneratedRecordsAreCurrent fails
// when it no longer matches what this command would write.
package main

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
)

func main() {
	out := flag.String("out", "records_gen.go", "file to write, in the current directory")
	flag.Parse()
	dir, err := os.Getwd()
	if err != nil {
		fail(err)
	}
	src, err := Generate(dir, filepath.Base(*out), flag.Args())
	if err != nil {
		fail(err)
	}
	if err := os.WriteFile(*out, src, 0o644); err != nil {
		fail(err)
	}
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, "recordgen:", err)
	os.Exit(1)
}
