package cli

import (
	"fmt"
	"io"
	"path/filepath"

	"github.com/spf13/pflag"

	"github.com/inbox-dev/inbox/spool"
)

var initCommand = &command{
	name: "init", short: "create the store (safe to repeat)",
	long: `Create an inbox store: a directory holding threads, messages, leases, read
cursors, an event log and an index. Running it again on an existing store
changes nothing. Every other command needs the store to exist.

The store is --db, else $INBOX_DB, else .agents/inbox in the current
directory. Directories are 0700 and files 0600; --shared makes them 0770 and
0660 for a group of users.`,
	examples: []string{"inbox init", "inbox init --db .agents/coord.db"},
	new:      func() runner { return &initCmd{} },
}

type initCmd struct{ shared bool }

func (r *initCmd) flags(fs *pflag.FlagSet, c *call) {
	fs.BoolVar(&r.shared, "shared", false, "make the store group-shared (files 0660, directories 0770)")
}

func (r *initCmd) run(c *call) (*result, error) {
	if err := c.noArgs(); err != nil {
		return nil, err
	}
	var created bool
	var err error
	abs := c.g.db
	if isNATS(c.g.db) {
		_, created, err = OpenNATS(c.g.db, true, "cli")
	} else {
		created, err = spool.Init(c.g.db, r.shared)
		abs, _ = filepath.Abs(c.g.db)
	}
	if err != nil {
		return nil, err
	}
	res := &result{}
	res.set("db", abs).set("created", created).set("format_version", spool.FormatVersion)
	res.human = func(w io.Writer) {
		if created {
			fmt.Fprintf(w, "initialized inbox store at %s\n", abs)
		} else {
			fmt.Fprintf(w, "inbox store at %s is already initialized\n", abs)
		}
	}
	return res, nil
}
