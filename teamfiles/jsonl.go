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
//	DIR/.inbox-bridge/held/{team}/{member}  a hard link to the inbox the bridge last wrote to
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
// save even when a recipe has replaced the file meanwhile: the hold moves
// to a new file only after a save.

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
	ids   map[string][]*idSet // per "team/member": the ids of the bridge's lines in its inbox and held inode
	held  map[string]uint64   // per "team/member": the inode held, once looked at (0: none)
	// frozen keeps every hold where it is: until the bridge has gone over
	// the events it may have written before a crash, and in fsck.
	frozen bool
}

var _ side = (*jsonlBridge)(nil)

// idSet is the message ids of the bridge's lines in one inbox file.
type idSet struct {
	inode uint64
	ids   map[string]bool
}

func newJSONL(cfg Config) *jsonlBridge {
	return &jsonlBridge{base: newBase(cfg, "team dir", "jsonl.json"), ids: map[string][]*idSet{}, held: map[string]uint64{}, frozen: true}
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
}

// flush has no lines to write (outbound writes each at once); the loop
// calls it once it has caught up with the log, which is when the holds
// may move: every line written before a crash is known again.
func (b *jsonlBridge) flush() {
	if b.frozen {
		b.frozen = false
		for k := range b.state.Files {
			if team, member, ok := strings.Cut(k, "/"); ok {
				b.followCursor(team, member)
			}
		}
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

// heldPath is where the bridge holds a link to team/member's inbox.
func (b *jsonlBridge) heldPath(team, member string) string {
	return filepath.Join(b.cfg.Dir, stateDir, "held", team, member)
}

// heldInode is the inode the bridge holds for team/member, 0 when none.
func (b *jsonlBridge) heldInode(team, member string) uint64 {
	k := team + "/" + member
	if ino, ok := b.held[k]; ok {
		return ino
	}
	var ino uint64
	if fi, err := os.Lstat(b.heldPath(team, member)); err == nil && fi.Mode().IsRegular() {
		ino = inodeOf(fi)
	}
	b.held[k] = ino
	return ino
}

// hold makes the held link of team/member the inode its inbox is now,
// which must be want; the state is saved first, so that every line
// written into the inode held before is known from the state alone.
func (b *jsonlBridge) hold(team, member string, want uint64) error {
	if b.frozen || b.heldInode(team, member) == want {
		return nil
	}
	b.dirty = true
	b.save()
	if b.dirty {
		return fmt.Errorf("save the state before moving the hold")
	}
	hdir, err := dirAt(true, b.cfg.Dir, stateDir, "held", team)
	if err != nil {
		return err
	}
	tmp := filepath.Join(hdir, member+".tmp")
	os.Remove(tmp)
	if err := os.Link(filepath.Join(b.memberDir(team, member), inboxName), tmp); err != nil {
		return err
	}
	fi, err := os.Lstat(tmp)
	if err != nil || inodeOf(fi) != want {
		os.Remove(tmp)
		return fmt.Errorf("the inbox of %s/%s was replaced while it was held", team, member)
	}
	if err := os.Rename(tmp, b.heldPath(team, member)); err != nil {
		return err
	}
	b.held[team+"/"+member] = want
	return nil
}

// followCursor moves the hold to the inbox being read, once the bridge
// is done with the inode it held.
func (b *jsonlBridge) followCursor(team, member string) {
	st := b.state.Files[team+"/"+member]
	if st == nil || st.Inode == 0 {
		return
	}
	if err := b.hold(team, member, st.Inode); err != nil {
		b.cfg.Log.Debug("team dir: hold", "team", team, "member", member, "error", err)
	}
}

// idsIn returns the ids of the bridge's lines in file p (inode),
// scanning it again when it is another file than last time.
func (b *jsonlBridge) idsIn(k, p string, inode uint64) *idSet {
	for _, s := range b.ids[k] {
		if s.inode == inode {
			return s
		}
	}
	s := &idSet{inode: inode, ids: map[string]bool{}}
	if f, err := openFile(p, os.O_RDONLY, 0); err == nil {
		eachRecord(f, func(rec record) {
			if id := lineMessageID(rec.body); id != "" {
				s.ids[id] = true
			}
		})
		f.Close()
	}
	// Keep the sets of the two files that matter: the inbox and the held.
	sets := append(b.ids[k], s)
	if len(sets) > 2 {
		sets = sets[len(sets)-2:]
	}
	b.ids[k] = sets
	return s
}

// wrote reports whether the bridge's line for message id is in
// team/member's inbox (inode), or in the inode it holds.
func (b *jsonlBridge) wrote(team, member string, inode uint64, id string) bool {
	k := team + "/" + member
	if b.idsIn(k, filepath.Join(b.memberDir(team, member), inboxName), inode).ids[id] {
		return true
	}
	h := b.heldInode(team, member)
	return h != 0 && h != inode && b.idsIn(k, b.heldPath(team, member), h).ids[id]
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
		if b.frozen || b.heldInode(team, member) == inodeOf(fi) || try == 2 {
			break
		}
		// Another inbox than the one held: done with the old one, hold
		// this one before writing to it.
		f.Close()
		b.ingestFile(ctx, team, member)
		b.hold(team, member, inodeOf(fi))
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
		if old == "" && b.heldInode(team, member) == st.Inode {
			old = b.heldPath(team, member)
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
	b.ingestPath(ctx, team, member, filepath.Join(dir, inboxName), st)
	b.followCursor(team, member)
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
	const batch = 500
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
