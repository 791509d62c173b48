package teamfiles

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/inbox-dev/inbox"
)

// Checks fsck runs on team files (run them while no daemon bridges the
// same files, or accept that a message in flight shows as missing):
//
//	team_file_missing_message     a message the store delivered to a member is not in its file
//	team_file_duplicate_message   a message is in a member's file more than once
//	team_file_not_taken_in        a line or entry others wrote is not in the store yet
//	team_file_unsafe              a symlink, FIFO, socket or device in place of a team file or directory
//
// With repair, a missing message is written, a duplicate removed (the
// first copy stays), what was not taken in is taken in, and an unsafe
// file is set aside as NAME.bad (the planted entry itself is renamed; a
// symlink's target is never touched).

// expected lists, per "team/member", the messages the store delivered
// that belong in that member's file, in event order: kind is "jsonl" or
// "claude" (whose origin keeps a message out of the file it came from).
func expected(ctx context.Context, bus inbox.Bus, kind string, include func(team, member string) bool) (map[string][]*inbox.Message, error) {
	teams := &teamCache{bus: bus}
	out := map[string][]*inbox.Message{}
	err := bus.Events(ctx, 0, func(ev *inbox.Event) bool {
		if isTeamEvent(ev) {
			teams.apply(ev)
			return true
		}
		m, origin := messageOf(ctx, bus, ev)
		if m == nil {
			return true
		}
		for _, t := range teams.get() {
			for _, member := range t.Members {
				if !include(t.Name, member) || !routes(m, t, member) {
					continue
				}
				from := jsonlOrigin(t.Name, member)
				if kind == "claude" {
					from = claudeOrigin(t.Name, member)
				}
				if origin != nil && origin.Descriptor == from {
					continue
				}
				k := t.Name + "/" + member
				out[k] = append(out[k], m)
			}
		}
		return true
	})
	return out, err
}

// CheckJSONL compares seed 002's member inboxes under cfg.Dir with the
// store, and with repair makes them agree.
func CheckJSONL(ctx context.Context, cfg Config, repair bool) ([]inbox.Finding, error) {
	cfg.defaults()
	b := newJSONL(cfg)
	if err := readJSON(b.statePath(), &b.state); err != nil {
		return nil, err
	}
	if b.state.Files == nil {
		b.state.Files = map[string]*fileState{}
	}
	last, err := cfg.Bus.LastEventID(ctx)
	if err != nil {
		return nil, err
	}
	if err := b.teams.load(ctx, last); err != nil {
		return nil, err
	}
	want, err := expected(ctx, cfg.Bus, "jsonl", func(string, string) bool { return true })
	if err != nil {
		return nil, err
	}
	var out []inbox.Finding
	add := func(f inbox.Finding) *inbox.Finding { out = append(out, f); return &out[len(out)-1] }
	unsafe := unsafeFindings(add, repair)
	for _, t := range b.teams.get() {
		for _, member := range t.Members {
			dir := b.memberDir(t.Name, member)
			current := filepath.Join(dir, inboxName)
			if _, err := b.checkMemberDir(t.Name, member); errors.Is(err, errUnsafe) {
				unsafe(err)
				continue
			}
			if planted := memberFilesUnsafe(dir); len(planted) > 0 {
				for _, err := range planted {
					unsafe(err)
				}
				continue
			}
			if _, err := os.Stat(current); err != nil {
				if len(want[t.Name+"/"+member]) > 0 {
					f := add(inbox.Finding{Check: "team_file_missing_message", Path: current,
						Detail: fmt.Sprintf("the inbox is missing; %d messages belong in it", len(want[t.Name+"/"+member]))})
					if repair {
						f.Repaired = b.writeMissing(ctx, t.Name, member, want[t.Name+"/"+member]) == nil
					}
				}
				continue
			}
			count := idCounts(dir)
			for _, m := range want[t.Name+"/"+member] {
				if count[m.MessageID] == 0 {
					f := add(inbox.Finding{Check: "team_file_missing_message", ThreadID: m.ThreadID, Path: current,
						Detail: "message " + m.MessageID + " was delivered to " + member + " but is not in the file"})
					if repair {
						f.Repaired = b.appendLine(ctx, t.Name, member, m) == nil
					}
				}
			}
			for id, n := range count {
				if n > 1 {
					f := add(inbox.Finding{Check: "team_file_duplicate_message", Path: current,
						Detail: fmt.Sprintf("message %s is in the file %d times", id, n)})
					if repair {
						f.Repaired = b.dedupe(t.Name, member, id) == nil
					}
				}
			}
			if n := b.pendingLines(t.Name, member); n > 0 {
				f := add(inbox.Finding{Check: "team_file_not_taken_in", Path: current,
					Detail: fmt.Sprintf("%d lines others wrote are not in the store yet", n)})
				if repair {
					b.ingestFile(ctx, t.Name, member)
					f.Repaired = b.pendingLines(t.Name, member) == 0
				}
			}
		}
	}
	if repair && b.dirty {
		if _, err := dirAt(true, cfg.Dir, stateDir); err != nil {
			return out, err
		}
		if err := writeJSON(b.statePath(), &b.state); err != nil {
			return out, err
		}
	}
	return out, nil
}

// unsafeFindings returns the function that reports a refused path (an
// *unsafeError) once as team_file_unsafe through add, setting it aside
// when repair is set.
func unsafeFindings(add func(inbox.Finding) *inbox.Finding, repair bool) func(err error) {
	seen := map[string]bool{}
	return func(err error) {
		var ue *unsafeError
		if !errors.As(err, &ue) || seen[ue.path] {
			return
		}
		seen[ue.path] = true
		f := add(inbox.Finding{Check: "team_file_unsafe", Path: ue.path,
			Detail: fmt.Sprintf("%s in place of %s: the bridge never follows or opens it", ue.what, ue.want)})
		if repair {
			f.Repaired = setAside(ue.path) == nil
		}
	}
}

// memberFilesUnsafe checks the files of a seed 002 member directory (the
// inbox, its lock, errors.log, rotated inboxes) for anything but regular
// files.
func memberFilesUnsafe(dir string) []error {
	var out []error
	entries, _ := os.ReadDir(dir)
	for _, e := range entries {
		n := e.Name()
		if n != inboxName && n != lockName && n != errorsName && !strings.HasPrefix(n, inboxName+".") || isSetAside(n) {
			continue
		}
		if err := regularOrMissing(filepath.Join(dir, n)); err != nil {
			out = append(out, err)
		}
	}
	return out
}

// isSetAside reports whether n is the name of a file fsck --repair set
// aside (NAME.bad, NAME.bad-N).
func isSetAside(n string) bool {
	return strings.HasSuffix(n, ".bad") || strings.Contains(n, ".bad-")
}

func (b *jsonlBridge) writeMissing(ctx context.Context, team, member string, ms []*inbox.Message) error {
	for _, m := range ms {
		if err := b.appendLine(ctx, team, member, m); err != nil {
			return err
		}
	}
	return nil
}

// inboxFiles lists a member's inbox and its rotated files.
func inboxFiles(dir string) []string {
	entries, _ := os.ReadDir(dir)
	var out []string
	for _, e := range entries {
		n := e.Name()
		if (n == inboxName || strings.HasPrefix(n, inboxName+".") && n != lockName) && !isSetAside(n) {
			out = append(out, filepath.Join(dir, n))
		}
	}
	return out
}

// idCounts counts the bridge's lines per message id across a member's
// inbox files.
func idCounts(dir string) map[string]int {
	count := map[string]int{}
	for _, p := range inboxFiles(dir) {
		f, err := openFile(p, os.O_RDONLY, 0)
		if err != nil {
			continue
		}
		sc := bufio.NewScanner(f)
		sc.Buffer(make([]byte, 64<<10), 128<<20)
		for sc.Scan() {
			if id := lineMessageID(sc.Bytes()); id != "" {
				count[id]++
			}
		}
		f.Close()
	}
	return count
}

// dedupe removes every copy of message id but the first from a member's
// inbox files, under the inbox lock.
func (b *jsonlBridge) dedupe(team, member, id string) error {
	dir := b.memberDir(team, member)
	lk, err := b.lock(dir)
	if err != nil {
		return err
	}
	defer lk.Unlock()
	seen := false
	files := inboxFiles(dir)
	slices.SortFunc(files, func(a, c string) int { // rotated files first: they are older
		if filepath.Base(a) == inboxName {
			return 1
		}
		if filepath.Base(c) == inboxName {
			return -1
		}
		return strings.Compare(a, c)
	})
	for _, p := range files {
		data, err := readFile(p)
		if err != nil {
			return err
		}
		var kept bytes.Buffer
		changed := false
		for _, line := range bytes.SplitAfter(data, []byte("\n")) {
			if lineMessageID(line) == id {
				if seen {
					changed = true
					continue
				}
				seen = true
			}
			kept.Write(line)
		}
		if changed {
			if err := os.WriteFile(p+".dedupe", kept.Bytes(), 0o600); err != nil {
				return err
			}
			if err := os.Rename(p+".dedupe", p); err != nil {
				return err
			}
			if filepath.Base(p) == inboxName {
				// The file is another one now: read it from the start again
				// (what was taken in is known to the store).
				if fi, err := os.Stat(p); err == nil {
					b.state.Files[team+"/"+member] = &fileState{Inode: inodeOf(fi)}
					b.dirty = true
				}
				delete(b.ids, team+"/"+member)
			}
		}
	}
	return nil
}

// pendingLines counts the complete lines others wrote past the state's
// offset in a member's current inbox.
func (b *jsonlBridge) pendingLines(team, member string) int {
	p := filepath.Join(b.memberDir(team, member), inboxName)
	fi, err := os.Lstat(p)
	if err != nil || !fi.Mode().IsRegular() {
		return 0
	}
	st := b.state.Files[team+"/"+member]
	var off int64
	if st != nil && st.Inode == inodeOf(fi) {
		off = st.Offset
	}
	data, err := readFile(p)
	if err != nil || off > int64(len(data)) {
		return 0
	}
	n := 0
	rest := data[off:]
	for {
		i := bytes.IndexByte(rest, '\n')
		if i < 0 {
			return n
		}
		line := bytes.TrimSpace(rest[:i])
		if len(line) > 0 && lineMessageID(line) == "" {
			if _, err := inbox.ParseSeed002(line); err == nil {
				n++
			}
		}
		rest = rest[i+1:]
	}
}
