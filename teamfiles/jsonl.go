package teamfiles

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/inbox-dev/inbox"
)

// Seed 002's files (SPEC §11 --team-dir):
//
//	DIR/{team}/members/{member}/inbox       one seed-002 JSON line per message
//	DIR/{team}/members/{member}/inbox.lock  flock held while a line is appended
//	DIR/{team}/members/{member}/errors.log  lines that could not be taken in
//	DIR/{team}/members/{member}/inbox.YYYYMMDD-HHMMSS  rotated inboxes
//	DIR/.inbox-bridge/jsonl.json            the bridge's state
//	DIR/.inbox-bridge/jsonl-requests.json   what lines taken in may answer (requests.go)
//	DIR/.inbox-bridge/jsonl.lock            flocked while a bridge runs
//	DIR/.inbox-bridge/held/{team}/{member}/{inode}  hard links to the inboxes the bridge wrote to or reads
//
// A line the bridge writes is the message's seed-002 line with one more
// member, "messageId"; a line without one was written by someone else and
// is taken in. A line is known by what it says, never by where it is: the
// bridge's by its messageId, another's by its sender, recipient (the
// file's member), timestamp, type and content. So seed 002's recipes that
// rewrite the file (a temp file and mv, head and tail, a jq filter) take
// nothing in twice.
//
// What the bridge wrote is a person's to remove: it never writes a line
// twice into a file, and knows what it wrote by its state (every message
// up to OutEvent that belongs in a file was written there, but those in
// Unwritten). A crash may lose the state saved since a line was written;
// the bridge then looks for the line in the file and in the inode it
// holds a link to (held), which is the one it wrote to since its last
// the bridge then looks for the line in the file and in the inodes it
// holds links to (held): every inode it wrote to since its last save, even
// one a recipe has replaced meanwhile. A hold is added before the first
// write into an inode, and let go only after a save, once the bridge has
// caught up, and never for the inbox as it is now or the one it reads.

const (
	inboxName  = "inbox"
	lockName   = "inbox.lock"
	errorsName = "errors.log"
	stateDir   = ".inbox-bridge"
)

// jsonlState is DIR/.inbox-bridge/jsonl.json.
type jsonlState struct {
	// OutEvent is the last event whose messages are in the files.
	OutEvent int64 `json:"out_event"`
	// Files says, per "team/member", how far its inbox was taken in.
	Files map[string]*fileState `json:"files"`
	// TookIn are the messages taken in from a file into a thread that
	// existed (a response, an acknowledgment) whose event the outbound
	// side has not reached yet: it keeps each out of the file it came
	// from, as a new thread's origin does.
	TookIn []tookIn `json:"took_in,omitempty"`
	// Unwritten lists, per "team/member", the messages up to OutEvent
	// that belong in its file and that the bridge could not write there
	// (an unsafe file): fsck reports them missing, --repair and the
	// bridge's sweeps write them.
	Unwritten map[string][]string `json:"unwritten,omitempty"`
}

// tookIn is a message taken in from file File ("team/member") into a
// thread, added by event Event.
type tookIn struct {
	Event   int64  `json:"event"`
	Message string `json:"message"`
	File    string `json:"file"`
}

// fileState is how far one inbox file (by inode) was taken in: Offset
// bytes, Line lines.
type fileState struct {
	Inode  uint64 `json:"inode"`
	Offset int64  `json:"offset"`
	Line   int64  `json:"line"`
}

// jsonlBridge is the bridge's state, owned by its loop (bridge.go).
type jsonlBridge struct {
	base
	state jsonlState
	ids   map[string]map[uint64]*idSet // per "team/member" and inode: the ids of the bridge's lines
	held  map[string]map[uint64]bool   // per "team/member": the inodes held, once looked at
	// frozen keeps every hold: until the bridge has gone over the events
	// it may have written before a crash, and in fsck.
	frozen bool
}

var _ side = (*jsonlBridge)(nil)

// idSet is the message ids of the bridge's lines in one inbox file, of
// size bytes when last looked at.
type idSet struct {
	inode uint64
	ids   map[string]bool
	size  int64
}

func newJSONL(cfg Config) *jsonlBridge {
	return &jsonlBridge{base: newBase(cfg, "team dir", "jsonl.json"), ids: map[string]map[uint64]*idSet{}, held: map[string]map[uint64]bool{}, frozen: true}
}

// RunJSONL keeps seed 002's member inbox files under cfg.Dir in step with
// the bus until ctx ends. It holds DIR/.inbox-bridge/jsonl.lock while it
// runs (fsck looks at it to tell a message in flight from a missing one).
func RunJSONL(ctx context.Context, cfg Config) error {
	b := newJSONL(cfg)
	if err := b.open(&b.state); err != nil {
		return err
	}
	lk, err := lockPath(b.lockPath())
	if err != nil {
		return fmt.Errorf("team dir: %w", err)
	}
	defer lk.Unlock()
	// Read the state again under the lock: an fsck --repair may have
	// changed it meanwhile.
	b.state = jsonlState{}
	if err := readJSON(b.statePath(), &b.state); err != nil {
		return fmt.Errorf("team dir: read %s: %w", b.statePath(), err)
	}
	if b.state.Files == nil {
		b.state.Files = map[string]*fileState{}
	}
	return b.run(ctx, b)
}

func (b *jsonlBridge) lockPath() string { return filepath.Join(b.cfg.Dir, stateDir, "jsonl.lock") }

func (b *jsonlBridge) start(ctx context.Context) error {
	if err := b.teams.load(ctx, b.state.OutEvent); err != nil {
		return err
	}
	b.layout()
	b.ingestAll(ctx)
	return nil
}

func (b *jsonlBridge) outEvent() int64 { return b.state.OutEvent }

func (b *jsonlBridge) changed(ctx context.Context, dir string) {
	if t, m, ok := b.memberOf(dir); ok {
		b.ingestFile(ctx, t, m)
	}
}

func (b *jsonlBridge) sweep(ctx context.Context) {
	b.layout()
	b.ingestAll(ctx)
	b.retryUnwritten(ctx)
	b.release()
}

// flush has no lines to write (outbound writes each at once); the loop
// calls it once it has caught up with the log, which is when the holds
// may move: every line written before a crash is known again.
func (b *jsonlBridge) flush() {
	if b.frozen {
		b.frozen = false
		b.release()
	}
}

func (b *jsonlBridge) save() { b.saveState(&b.state) }

func (b *jsonlBridge) memberDir(team, member string) string {
	return filepath.Join(b.cfg.Dir, team, "members", member)
}

// memberOf maps a member directory back to its team and member.
func (b *jsonlBridge) memberOf(dir string) (team, member string, ok bool) {
	rel, err := filepath.Rel(b.cfg.Dir, dir)
	if err != nil {
		return "", "", false
	}
	parts := strings.Split(rel, string(filepath.Separator))
	if len(parts) != 3 || parts[1] != "members" {
		return "", "", false
	}
	return parts[0], parts[2], true
}

// layout makes every team member's directory and inbox file, and watches
// the directories. A member whose directory or inbox is not what the
// bridge makes (a symlink, a FIFO, …) is skipped, with an error logged.
func (b *jsonlBridge) layout() {
	for _, t := range b.teams.get() {
		for _, m := range t.Members {
			dir, err := b.ensureMemberDir(t.Name, m)
			if err != nil {
				b.refused.report(b.cfg.Log, "team dir: create", err, "team", t.Name, "member", m)
				continue
			}
			f, err := openFile(filepath.Join(dir, inboxName), os.O_CREATE|os.O_WRONLY, 0o600)
			if err != nil {
				b.refused.report(b.cfg.Log, "team dir: create the inbox", err, "team", t.Name, "member", m)
				continue
			}
			f.Close()
			b.notify.watch(dir)
		}
	}
}

// ensureMemberDir makes team/members/member under the team directory,
// refusing any part of it that is not a directory.
func (b *jsonlBridge) ensureMemberDir(team, member string) (string, error) {
	return dirAt(true, b.cfg.Dir, team, "members", member)
}

// checkMemberDir is ensureMemberDir without making anything.
func (b *jsonlBridge) checkMemberDir(team, member string) (string, error) {
	return dirAt(false, b.cfg.Dir, team, "members", member)
}

func (b *jsonlBridge) ingestAll(ctx context.Context) {
	for _, t := range b.teams.get() {
		for _, m := range t.Members {
			b.ingestFile(ctx, t.Name, m)
		}
	}
}

// outbound writes the message ev added into every member file it belongs in.
func (b *jsonlBridge) outbound(ctx context.Context, ev *inbox.Event) {
	after := b.state.OutEvent
	defer func() {
		b.state.OutEvent, b.dirty = ev.EventID, true
		b.state.TookIn = slices.DeleteFunc(b.state.TookIn, func(x tookIn) bool { return x.Event <= ev.EventID })
	}()
	if isTeamEvent(ev) {
		b.cfg.index.note(after, ev, nil)
		b.teams.apply(ev)
		b.layout()
		return
	}
	m, origin := messageOf(ctx, b.cfg.Bus, ev)
	b.cfg.index.note(after, ev, m)
	if m == nil {
		return
	}
	for _, t := range b.teams.get() {
		for _, member := range t.Members {
			k := t.Name + "/" + member
			if !routes(m, t, member) || origin != nil && origin.Descriptor == jsonlOrigin(t.Name, member) || b.cameFrom(k, m) {
				continue
			}
			if err := b.appendLine(ctx, t.Name, member, m); err != nil {
				b.refused.report(b.cfg.Log, "team dir: append", err, "team", t.Name, "member", member, "message", m.MessageID)
				if b.state.Unwritten == nil {
					b.state.Unwritten = map[string][]string{}
				}
				b.state.Unwritten[k] = append(b.state.Unwritten[k], m.MessageID)
			}
		}
	}
}

// cameFrom reports whether m was taken in from file k into a thread
// that existed (TookIn).
func (b *jsonlBridge) cameFrom(k string, m *inbox.Message) bool {
	return slices.ContainsFunc(b.state.TookIn, func(x tookIn) bool { return x.File == k && x.Message == m.MessageID })
}

// retryUnwritten writes the messages the bridge could not write before,
// into the files that are sound now.
func (b *jsonlBridge) retryUnwritten(ctx context.Context) {
	for k, ids := range b.state.Unwritten {
		team, member, _ := strings.Cut(k, "/")
		var left []string
		for _, id := range ids {
			m, err := b.messageByID(ctx, id)
			if err == nil {
				err = b.appendLine(ctx, team, member, m)
			}
			if err != nil {
				left = append(left, id)
			}
		}
		if len(left) < len(ids) {
			b.dirty = true
		}
		if len(left) == 0 {
			delete(b.state.Unwritten, k)
		} else {
			b.state.Unwritten[k] = left
		}
	}
}

// messageByID finds a message by its id through the events.
func (b *jsonlBridge) messageByID(ctx context.Context, id string) (*inbox.Message, error) {
	var found *inbox.Message
	err := b.cfg.Bus.Events(ctx, 0, func(ev *inbox.Event) bool {
		if ev.MessageID == id {
			found, _ = messageOf(ctx, b.cfg.Bus, ev)
			return false
		}
		return true
	})
	if err == nil && found == nil {
		err = inbox.NotFound("message %s is not in the log", id)
	}
	return found, err
}

func jsonlOrigin(team, member string) string { return "teamfile:jsonl:" + team + "/" + member }

// outLine is m as the bridge writes it: its seed-002 line and its id.
func outLine(m *inbox.Message) []byte {
	line := inbox.Seed002Of(m).Line()
	id, _ := json.Marshal(m.MessageID)
	return append(append(append(line[:len(line)-1:len(line)-1], `,"messageId":`...), id...), '}', '\n')
}

// lineMessageID is the "messageId" of a line the bridge wrote (one
// record), "" for any other line.
func lineMessageID(line []byte) string {
	if !bytes.Contains(line, []byte(`"messageId"`)) {
		return ""
	}
	var v struct {
		ID string `json:"messageId"`
	}
	json.Unmarshal(line, &v)
	return v.ID
}

func inodeOf(fi fs.FileInfo) uint64 {
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		return st.Ino
	}
	return 0
}

// heldDir is where the bridge holds links to team/member's inboxes.
func (b *jsonlBridge) heldDir(team, member string) string {
	return filepath.Join(b.cfg.Dir, stateDir, "held", team, member)
}

// heldPath is the bridge's link to inode of team/member's inboxes.
func (b *jsonlBridge) heldPath(team, member string, inode uint64) string {
	return filepath.Join(b.heldDir(team, member), strconv.FormatUint(inode, 10))
}

// heldInodes are the inodes the bridge holds for team/member.
func (b *jsonlBridge) heldInodes(team, member string) map[uint64]bool {
	k := team + "/" + member
	if h, ok := b.held[k]; ok {
		return h
	}
	h := map[uint64]bool{}
	entries, _ := os.ReadDir(b.heldDir(team, member))
	for _, e := range entries {
		if ino, err := strconv.ParseUint(e.Name(), 10, 64); err == nil && e.Type().IsRegular() {
			h[ino] = true
		}
	}
	b.held[k] = h
	return h
}

// hold links inode, which team/member's inbox must be now, into the
// bridge's held directory: from there it is found after a recipe has
// replaced the inbox, and no other file gets its number meanwhile.
func (b *jsonlBridge) hold(team, member string, inode uint64) error {
	h := b.heldInodes(team, member)
	if h[inode] {
		return nil
	}
	if _, err := dirAt(true, b.cfg.Dir, stateDir, "held", team, member); err != nil {
		return err
	}
	tmp := b.heldPath(team, member, inode) + ".tmp"
	os.Remove(tmp)
	if err := os.Link(filepath.Join(b.memberDir(team, member), inboxName), tmp); err != nil {
		return err
	}
	fi, err := os.Lstat(tmp)
	if err != nil || inodeOf(fi) != inode {
		os.Remove(tmp)
		return fmt.Errorf("the inbox of %s/%s was replaced while it was held", team, member)
	}
	if err := os.Rename(tmp, b.heldPath(team, member, inode)); err != nil {
		return err
	}
	h[inode] = true
	return nil
}

// release lets go of the holds no longer needed: once the bridge has
// caught up and saved its state (which then says what it wrote there),
// every inode but the inbox as it is now and the one it reads.
func (b *jsonlBridge) release() {
	if b.frozen {
		return
	}
	saved := false
	for k, h := range b.held {
		team, member, _ := strings.Cut(k, "/")
		keep := map[uint64]bool{}
		if fi, err := os.Lstat(filepath.Join(b.memberDir(team, member), inboxName)); err == nil {
			keep[inodeOf(fi)] = true
		}
		if st := b.state.Files[k]; st != nil {
			keep[st.Inode] = true
		}
		for ino := range h {
			if keep[ino] {
				continue
			}
			if !saved {
				b.dirty = true
				b.save()
				if saved = !b.dirty; !saved {
					return
				}
			}
			if err := os.Remove(b.heldPath(team, member, ino)); err == nil || errors.Is(err, fs.ErrNotExist) {
				delete(h, ino)
				delete(b.ids[k], ino)
			}
		}
	}
}

// idsIn returns the ids of the bridge's lines in file p (inode), scanning
// it again when it is another file than last time, or shorter than the
// bridge knows it (rewritten in place).
func (b *jsonlBridge) idsIn(k, p string, inode uint64) *idSet {
	var size int64 = -1
	if fi, err := os.Lstat(p); err == nil {
		size = fi.Size()
	}
	if s := b.ids[k][inode]; s != nil && size >= s.size {
		return s
	}
	s := &idSet{inode: inode, ids: map[string]bool{}, size: size}
	if f, err := openFile(p, os.O_RDONLY, 0); err == nil {
		eachRecord(f, func(rec record) {
			if id := lineMessageID(rec.body); id != "" {
				s.ids[id] = true
			}
		})
		f.Close()
	}
	if b.ids[k] == nil {
		b.ids[k] = map[uint64]*idSet{}
	}
	b.ids[k][inode] = s
	return s
}

// wrote reports whether the bridge's line for message id is in
// team/member's inbox (inode), or in an inode it holds.
func (b *jsonlBridge) wrote(team, member string, inode uint64, id string) bool {
	k := team + "/" + member
	if b.idsIn(k, filepath.Join(b.memberDir(team, member), inboxName), inode).ids[id] {
		return true
	}
	for h := range b.heldInodes(team, member) {
		if h != inode && b.idsIn(k, b.heldPath(team, member, h), h).ids[id] {
			return true
		}
	}
	return false
}

// lock takes the flock on a member directory's inbox.lock (seed 002's
// convention).
func (b *jsonlBridge) lock(dir string) (*fileLock, error) {
	return lockPath(filepath.Join(dir, lockName))
}

// appendLine appends m's line to team/member's inbox, unless the file
// has it already, under the inbox's flock, and rotates the file when it
// has grown past MaxSize.
func (b *jsonlBridge) appendLine(ctx context.Context, team, member string, m *inbox.Message) error {
	dir, err := b.ensureMemberDir(team, member)
	if err != nil {
		return err
	}
	lk, err := b.lock(dir)
	if err != nil {
		return err
	}
	defer lk.Unlock()
	p := filepath.Join(dir, inboxName)
	var f *os.File
	var fi fs.FileInfo
	for try := 0; ; try++ {
		if f, err = openFile(p, os.O_CREATE|os.O_APPEND|os.O_RDWR, 0o600); err != nil {
			return err
		}
		if fi, err = f.Stat(); err != nil {
			f.Close()
			return err
		}
		if b.wrote(team, member, inodeOf(fi), m.MessageID) {
			f.Close()
			return nil
		}
		if err = b.hold(team, member, inodeOf(fi)); err == nil {
			break
		}
		// Replaced between the open and the link: open it again.
		f.Close()
		if try == 2 {
			return err
		}
	}
	defer f.Close()
	ids := b.idsIn(team+"/"+member, p, inodeOf(fi))
	line := outLine(m)
	if size := fi.Size(); size > 0 {
		last := make([]byte, 1)
		if _, err := f.ReadAt(last, size-1); err == nil && last[0] != '\n' {
			// A writer died in the middle of a line: end it, so that ours
			// stays whole (the broken one goes to errors.log).
			line = append([]byte{'\n'}, line...)
		}
	}
	if _, err := f.Write(line); err != nil {
		return err
	}
	ids.ids[m.MessageID] = true
	ids.size += int64(len(line))
	if fi.Size()+int64(len(line)) > b.cfg.MaxSize {
		return b.rotate(ctx, team, member, f)
	}
	return nil
}

// rotate moves a full inbox aside as inbox.YYYYMMDD-HHMMSS after taking in
// every line of it, and starts an empty one. The caller holds the lock.
func (b *jsonlBridge) rotate(ctx context.Context, team, member string, f *os.File) error {
	b.ingestFile(ctx, team, member)
	dir := b.memberDir(team, member)
	name := inboxName + "." + time.Now().UTC().Format("20060102-150405")
	for i := 1; ; i++ {
		if _, err := os.Lstat(filepath.Join(dir, name)); errors.Is(err, fs.ErrNotExist) {
			break
		}
		name = inboxName + "." + time.Now().UTC().Format("20060102-150405") + "-" + strconv.Itoa(i)
	}
	if err := os.Rename(filepath.Join(dir, inboxName), filepath.Join(dir, name)); err != nil {
		return err
	}
	nf, err := openFile(filepath.Join(dir, inboxName), os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o600)
	if err != nil {
		return err
	}
	fi, err := nf.Stat()
	nf.Close()
	if err != nil {
		return err
	}
	// What was left unread in the old file was taken in above; the new one
	// starts at its beginning.
	b.state.Files[team+"/"+member] = &fileState{Inode: inodeOf(fi)}
	b.dirty = true
	b.cfg.Log.Info("team dir: rotated", "team", team, "member", member, "to", name)
	return nil
}

// ingestFile takes in the lines other processes appended to team/member's
// inbox since the last time, finishing a file someone rotated away first.
func (b *jsonlBridge) ingestFile(ctx context.Context, team, member string) {
	dir, err := b.checkMemberDir(team, member)
	if err != nil {
		if errors.Is(err, errUnsafe) {
			b.refused.report(b.cfg.Log, "team dir: take in", err, "team", team, "member", member)
		}
		return
	}
	k := team + "/" + member
	fi, err := os.Lstat(filepath.Join(dir, inboxName))
	if err != nil {
		return
	}
	if !fi.Mode().IsRegular() {
		b.refused.report(b.cfg.Log, "team dir: take in", regularOrMissing(filepath.Join(dir, inboxName)), "team", team, "member", member)
		return
	}
	cur := inodeOf(fi)
	st := b.state.Files[k]
	if st == nil {
		st = &fileState{Inode: cur}
		b.state.Files[k], b.dirty = st, true
	}
	if st.Inode != cur {
		// The inbox was rotated or rewritten by someone else: finish the
		// old file (a rotated one, or the inode the bridge holds).
		old := findInode(dir, st.Inode)
		if old == "" && b.heldInodes(team, member)[st.Inode] {
			old = b.heldPath(team, member, st.Inode)
		}
		if old != "" {
			if !b.ingestPath(ctx, team, member, old, st) {
				return // try again later
			}
		} else {
			b.cfg.Log.Warn("team dir: a rotated inbox is gone before it was read to the end", "dir", dir)
		}
		*st = fileState{Inode: cur}
		b.dirty = true
	}
	if err := b.hold(team, member, cur); err != nil {
		b.cfg.Log.Debug("team dir: hold", "team", team, "member", member, "error", err)
	}
	b.ingestPath(ctx, team, member, filepath.Join(dir, inboxName), st)
}

// findInode finds the rotated inbox file that is inode.
func findInode(dir string, inode uint64) string {
	entries, _ := os.ReadDir(dir)
	for _, e := range entries {
		if !isRotated(e.Name()) || !e.Type().IsRegular() {
			continue
		}
		if fi, err := e.Info(); err == nil && inodeOf(fi) == inode {
			return filepath.Join(dir, e.Name())
		}
	}
	return ""
}

// ingestPath takes in the whole records of file p from st on, in
// batches (one commit of the store each). It reports false when it
// stopped early (a failure to be retried).
func (b *jsonlBridge) ingestPath(ctx context.Context, team, member, p string, st *fileState) bool {
	f, err := openFile(p, os.O_RDONLY, 0)
	if err != nil {
		if errors.Is(err, errUnsafe) {
			b.refused.report(b.cfg.Log, "team dir: take in", err, "team", team, "member", member)
		}
		return false
	}
	defer f.Close()
	if _, err := f.Seek(st.Offset, io.SeekStart); err != nil {
		return false
	}
	rr := newRecordReader(f, st.Offset, st.Line)
	// A batch is one commit of the store; the state is saved after each
	// full one, so that a daemon killed over and over while it reads a
	// long file still gets further each time.
	const batch = 100
	for {
		var recs []record
		for len(recs) < batch {
			rec, ok := rr.next()
			if !ok {
				break // a partial last record waits for its end
			}
			recs = append(recs, rec)
		}
		if len(recs) == 0 {
			return true
		}
		if !b.ingestRecords(ctx, team, member, st, recs) {
			return false
		}
		if len(recs) < batch {
			return true
		}
		b.save()
	}
}

// lineKey is the idempotency key of a line someone else wrote into
// team/member's inbox: what it says (sender, recipient, timestamp, type
// and content, the content's members in any order and spacing), never
// where it is, so that a line a recipe moved or rewrote is the same
// message.
func lineKey(team, member string, l *inbox.Seed002) string {
	content := []byte(l.Content)
	var v any
	if json.Unmarshal(content, &v) == nil {
		content, _ = json.Marshal(v)
	}
	return key("jsonl-line", team, member, l.From, l.Timestamp, l.Type, string(content))
}

// ingestRecords takes in consecutive whole records starting at st, and
// advances st past them; false means the store refused them as a whole
// (retried later).
func (b *jsonlBridge) ingestRecords(ctx context.Context, team, member string, st *fileState, recs []record) bool {
	var ins []inbox.SendInput
	var at []int // the record each input is
	k := team + "/" + member
	for i, rec := range recs {
		if len(rec.body) == 0 || lineMessageID(rec.body) != "" {
			continue // blank, or one of the bridge's own
		}
		l, err := inbox.ParseSeed002(rec.body)
		if err == nil {
			err = inbox.ValidateAgent("from", l.From)
		}
		if err != nil {
			b.logError(team, member, rec.line, err, rec.body)
			continue
		}
		sum := sha256.Sum256(rec.body)
		in := inbox.SendInput{From: l.From, To: member, Content: l.SendContent(),
			Origin: &inbox.Origin{Descriptor: jsonlOrigin(team, member), SHA256: hex.EncodeToString(sum[:])}}
		in.IdempotencyKey = lineKey(team, member, l)
		ins = append(ins, in)
		at = append(at, i)
	}
	if len(ins) > 0 {
		results, errs, err := takeInAll(ctx, b.cfg, ins)
		if err != nil {
			b.cfg.Log.Warn("team dir: take in lines", "team", team, "member", member, "error", err)
			return false
		}
		for j, err := range errs {
			if err != nil {
				b.logError(team, member, recs[at[j]].line, err, recs[at[j]].body)
				continue
			}
			if r := results[j]; r != nil && r.Message != nil && r.Message.Seq > 1 && r.Message.EventID > b.state.OutEvent {
				b.state.TookIn = append(b.state.TookIn, tookIn{Event: r.Message.EventID, Message: r.Message.MessageID, File: k})
			}
		}
	}
	last := recs[len(recs)-1]
	st.Offset = last.end
	st.Line = last.line + last.lines - 1
	b.dirty = true
	return true
}

// logError records a line that cannot be taken in, in errors.log beside
// the inbox, with its line number.
func (b *jsonlBridge) logError(team, member string, lineNo int64, err error, line []byte) {
	msg := err.Error()
	var ie *inbox.Error
	if errors.As(err, &ie) {
		msg = ie.Render(func(f string) string { return f })
	}
	b.cfg.Log.Warn("team dir: a line was not taken in", "team", team, "member", member, "line", lineNo, "error", msg)
	b.errorLog(filepath.Join(b.memberDir(team, member), errorsName),
		fmt.Sprintf("line %d: %s: %s", lineNo, msg, inbox.Shorten(string(line), 500)), "team", team, "member", member)
}
