package cli

import (
	"fmt"
	"io"
	"path/filepath"

	"github.com/spf13/pflag"

	"github.com/inbox-dev/inbox"
	"github.com/inbox-dev/inbox/spool"
)

var initCommand = &command{
	name: "init", short: "create the store (safe to repeat)",
	long: `Create an inbox store: a directory holding threads, messages, leases, read
cursors, an event log and an index. Running it again on an existing store
changes nothing (but its maximum, with --max-blob). Every other command
needs the store to exist.

The store is --db, else $INBOX_DB, else .agents/inbox in the current
directory. Directories are 0700 and files 0600; --shared makes them 0770 and
0660 for a group of users.

--max-blob is the largest body, payload or task output the store takes
(default 1GiB): anything larger, or larger than the free space on the
store's disk, is refused (exit 30) without being read past the limit. It
is recorded in the store, so every process applies it; init --max-blob on
an existing store changes it (and nothing else). SIZE is bytes, or a number
and a unit: 512MiB, 1GiB (K, M, G, T are powers of 1024; KB, MB, GB, TB of
1000).`,
	examples: []string{"inbox init", "inbox init --db .agents/coord.db", "inbox init --max-blob 256MiB"},
	new:      func() runner { return &initCmd{} },
}

type initCmd struct {
	shared  bool
	maxBlob string
}

func (r *initCmd) flags(fs *pflag.FlagSet, c *call) {
	fs.BoolVar(&r.shared, "shared", false, "make the store group-shared (files 0660, directories 0770)")
	fs.StringVar(&r.maxBlob, "max-blob", "", "largest body, payload or task output the store takes: bytes, or 512MiB, 1GiB, … (default 1GiB)")
}

func (r *initCmd) run(c *call) (*result, error) {
	if err := c.noArgs(); err != nil {
		return nil, err
	}
	var maxBlob int64
	if c.fs.Changed("max-blob") {
		var err error
		if maxBlob, err = inbox.ParseSize("max_blob", r.maxBlob); err != nil {
			return nil, err
		}
	}
	var created bool
	var err error
	abs := c.g.db
	if isNATS(c.g.db) {
		if maxBlob != 0 {
			return nil, usagef("max-blob", "--max-blob is for a directory store; a NATS store bounds content by its server's limits")
		}
		_, created, err = OpenNATS(c.ctx, c.g.db, true, "cli")
	} else {
		created, err = spool.InitWith(c.g.db, spool.InitOptions{Shared: r.shared, MaxBlob: maxBlob})
		abs, _ = filepath.Abs(c.g.db)
	}
	if err != nil {
		return nil, err
	}
	res := &result{}
	res.set("db", abs).set("created", created).set("format_version", spool.FormatVersion)
	if !isNATS(c.g.db) {
		if maxBlob, err = spool.ReadMaxBlob(c.g.db); err != nil {
			return nil, err
		}
		res.set("max_blob", maxBlob)
	}
	res.human = func(w io.Writer) {
		if created {
			fmt.Fprintf(w, "initialized inbox store at %s\n", abs)
		} else {
			fmt.Fprintf(w, "inbox store at %s is already initialized\n", abs)
		}
		if c.fs.Changed("max-blob") {
			fmt.Fprintf(w, "largest body, payload or task output it takes: %s\n", inbox.FormatSize(maxBlob))
		}
	}
	return res, nil
}
