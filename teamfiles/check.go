package teamfiles

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/inbox-dev/inbox"
)

// Checks fsck runs on team files (they may run while a daemon bridges the
// same files: what is in flight then is the bridge's, not a finding):
//
//	team_file_missing_message     a message the store delivered to a member was never written into its file
//	team_file_duplicate_message   a message is in a member's file more than once
//	team_file_not_taken_in        a line or entry others wrote is not in the store yet
//	team_file_unsafe              a symlink, FIFO, socket or device in place of a team file or directory
//
// A line the bridge wrote that a person or a recipe later removed or
// archived is theirs: it is not missing, and repair never writes it back.
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
		if m.EventID == 0 {
			m.EventID = ev.EventID
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
	// Whether a bridge runs on these files: then what it has not reached
	// yet is in flight, and its state is its own.
	alone := true
	if _, err := os.Lstat(filepath.Join(cfg.Dir, stateDir)); err == nil {
		lk, ok, err := tryLockPath(b.lockPath())
		if err != nil {
			return nil, err
		}
		if alone = ok; ok {
			defer lk.Unlock()
		}
	}
	var out []inbox.Finding
	add := func(f inbox.Finding) *inbox.Finding { out = append(out, f); return &out[len(out)-1] }
	unsafe := unsafeFindings(add, repair)
	for _, t := range b.teams.get() {
		for _, member := range t.Members {
			k := t.Name + "/" + member
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
			// What the bridge never wrote: what it could not write, and,
			// while no bridge runs, what it has not reached.
			var owed []*inbox.Message
			for _, m := range want[k] {
				if slices.Contains(b.state.Unwritten[k], m.MessageID) || alone && m.EventID > b.state.OutEvent {
					owed = append(owed, m)
				}
			}
			if _, err := os.Stat(current); err != nil {
				if len(owed) > 0 {
					f := add(inbox.Finding{Check: "team_file_missing_message", Path: current,
						Detail: fmt.Sprintf("the inbox is missing; %d messages belong in it", len(owed))})
					if repair {
						f.Repaired = b.writeMissing(ctx, t.Name, member, owed) == nil
					}
				}
				continue
			}
			count := idCounts(dir)
			held := map[string]bool{}
			for h := range b.heldInodes(t.Name, member) {
				for id := range b.idsIn(k, b.heldPath(t.Name, member, h), h).ids {
					held[id] = true
				}
			}
			for _, m := range owed {
				there := count[m.MessageID] > 0 || held[m.MessageID]
				if !there {
					f := add(inbox.Finding{Check: "team_file_missing_message", ThreadID: m.ThreadID, Path: current,
						Detail: "message " + m.MessageID + " was delivered to " + member + " but never written into the file"})
					if repair {
						f.Repaired = b.appendLine(ctx, t.Name, member, m) == nil
						there = f.Repaired
					}
				}
				if repair && there {
					b.written(k, m.MessageID)
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
			if !alone {
				continue // the bridge takes in what others wrote
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
	if repair && alone && b.dirty {
		if _, err := dirAt(true, cfg.Dir, stateDir); err != nil {
			return out, err
		}
		if err := writeJSON(b.statePath(), &b.state); err != nil {
			return out, err
		}
	}
	return out, nil
}

// written drops message id from what the bridge could not write into
// file k, once it is there.
func (b *jsonlBridge) written(k, id string) {
	if left := slices.DeleteFunc(slices.Clone(b.state.Unwritten[k]), func(x string) bool { return x == id }); len(left) != len(b.state.Unwritten[k]) {
		b.state.Unwritten[k], b.dirty = left, true
		if len(left) == 0 {
			delete(b.state.Unwritten, k)
		}
	}
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

// isRotated reports whether n names a rotated inbox: seed 002's
// inbox.YYYYMMDD-HHMMSS, or the bridge's inbox.YYYYMMDD-HHMMSS-N. A
// recipe's temp file (inbox.tmp) is none.
func isRotated(n string) bool {
	rest, ok := strings.CutPrefix(n, inboxName+".")
	if !ok || len(rest) < 15 || rest[8] != '-' {
		return false
	}
	digits := func(s string) bool {
		for i := range len(s) {
			if s[i] < '0' || s[i] > '9' {
				return false
			}
		}
		return s != ""
	}
	if !digits(rest[:8]) || !digits(rest[9:15]) {
		return false
	}
	return len(rest) == 15 || rest[15] == '-' && digits(rest[16:])
}

// inboxFiles lists a member's inbox and its rotated files.
func inboxFiles(dir string) []string {
	entries, _ := os.ReadDir(dir)
	var out []string
	for _, e := range entries {
		if n := e.Name(); n == inboxName || isRotated(n) {
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
		eachRecord(f, func(rec record) {
			if id := lineMessageID(rec.body); id != "" {
				count[id]++
			}
		})
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
		var at int64
		eachRecord(bytes.NewReader(data), func(rec record) {
			start := at
			at = rec.end
			if lineMessageID(rec.body) == id {
				if seen {
					changed = true
					return
				}
				seen = true
			}
			kept.Write(data[start:rec.end])
		})
		kept.Write(data[at:])
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
	f, err := openFile(p, os.O_RDONLY, 0)
	if err != nil {
		return 0
	}
	defer f.Close()
	if _, err := f.Seek(off, io.SeekStart); err != nil {
		return 0
	}
	n := 0
	eachRecord(f, func(rec record) {
		if len(rec.body) > 0 && lineMessageID(rec.body) == "" {
			if _, err := inbox.ParseSeed002(rec.body); err == nil {
				n++
			}
		}
	})
	return n
}
