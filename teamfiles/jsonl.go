package teamfiles

import (
	"bufio"
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
//
// A line the bridge writes is the message's seed-002 line with one more
// member, "messageId"; a line without one was written by someone else and
// is taken in.

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
	ids   map[string]*idSet // per "team/member": the ids of the lines it wrote
}

var _ side = (*jsonlBridge)(nil)

// idSet is the message ids of the bridge's lines in one inbox file.
type idSet struct {
	inode uint64
	ids   map[string]bool
}

func newJSONL(cfg Config) *jsonlBridge {
	return &jsonlBridge{base: newBase(cfg, "team dir", "jsonl.json"), ids: map[string]*idSet{}}
}

// RunJSONL keeps seed 002's member inbox files under cfg.Dir in step with
// the bus until ctx ends.
func RunJSONL(ctx context.Context, cfg Config) error {
	b := newJSONL(cfg)
	if err := b.open(&b.state); err != nil {
		return err
	}
	if b.state.Files == nil {
		b.state.Files = map[string]*fileState{}
	}
	return b.run(ctx, b)
}

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
}

// flush has nothing to do: outbound writes each line at once.
func (b *jsonlBridge) flush() {}

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
	defer func() { b.state.OutEvent, b.dirty = ev.EventID, true }()
	if isTeamEvent(ev) {
		b.teams.apply(ev)
		b.layout()
		return
	}
	m, origin := messageOf(ctx, b.cfg.Bus, ev)
	if m == nil {
		return
	}
	for _, t := range b.teams.get() {
		for _, member := range t.Members {
			if !routes(m, t, member) || origin != nil && origin.Descriptor == jsonlOrigin(t.Name, member) {
				continue
			}
			if err := b.appendLine(ctx, t.Name, member, m); err != nil {
				b.refused.report(b.cfg.Log, "team dir: append", err, "team", t.Name, "member", member, "message", m.MessageID)
			}
		}
	}
}

func jsonlOrigin(team, member string) string { return "teamfile:jsonl:" + team + "/" + member }

// outLine is m as the bridge writes it: its seed-002 line and its id.
func outLine(m *inbox.Message) []byte {
	line := inbox.Seed002Of(m).Line()
	id, _ := json.Marshal(m.MessageID)
	return append(append(append(line[:len(line)-1:len(line)-1], `,"messageId":`...), id...), '}', '\n')
}

// lineMessageID is the "messageId" of a line the bridge wrote, "" for
// any other line.
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

// idsOf returns the ids of the bridge's lines in team/member's inbox,
// scanning the file again when it is another file than last time.
func (b *jsonlBridge) idsOf(team, member string, inode uint64) *idSet {
	k := team + "/" + member
	if s := b.ids[k]; s != nil && s.inode == inode {
		return s
	}
	s := &idSet{inode: inode, ids: map[string]bool{}}
	if f, err := openFile(filepath.Join(b.memberDir(team, member), inboxName), os.O_RDONLY, 0); err == nil {
		sc := bufio.NewScanner(f)
		sc.Buffer(make([]byte, 64<<10), 128<<20)
		for sc.Scan() {
			if id := lineMessageID(sc.Bytes()); id != "" {
				s.ids[id] = true
			}
		}
		f.Close()
	}
	b.ids[k] = s
	return s
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
	f, err := openFile(p, os.O_CREATE|os.O_APPEND|os.O_RDWR, 0o600)
	if err != nil {
		return err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return err
	}
	ids := b.idsOf(team, member, inodeOf(fi))
	if ids.ids[m.MessageID] {
		return nil
	}
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
	b.ids[team+"/"+member] = &idSet{inode: inodeOf(fi), ids: map[string]bool{}}
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
		// The inbox was rotated by someone else: finish the old file.
		if old := findInode(dir, st.Inode); old != "" {
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
}

// findInode finds the rotated inbox file that is inode.
func findInode(dir string, inode uint64) string {
	entries, _ := os.ReadDir(dir)
	for _, e := range entries {
		if !strings.HasPrefix(e.Name(), inboxName+".") || e.Name() == lockName || !e.Type().IsRegular() {
			continue
		}
		if fi, err := e.Info(); err == nil && inodeOf(fi) == inode {
			return filepath.Join(dir, e.Name())
		}
	}
	return ""
}

// ingestPath takes in the whole lines of file p from st on, in batches
// (one commit of the store each). It reports false when it stopped early
// (a failure to be retried).
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
	r := bufio.NewReaderSize(f, 64<<10)
	const batch = 500
	for {
		var lines [][]byte
		for len(lines) < batch {
			line, err := r.ReadBytes('\n')
			if err != nil {
				break // EOF: a partial last line waits for its end
			}
			lines = append(lines, line)
		}
		if len(lines) == 0 {
			return true
		}
		if !b.ingestLines(ctx, team, member, st, lines) {
			return false
		}
		if len(lines) < batch {
			return true
		}
	}
}

// ingestLines takes in consecutive whole lines starting at st, with one
// SendBatch, and advances st past them; false means the store refused the
// batch as a whole (retried later).
func (b *jsonlBridge) ingestLines(ctx context.Context, team, member string, st *fileState, lines [][]byte) bool {
	var ins []inbox.SendInput
	var at []int // the line each input is
	off := st.Offset
	for i, line := range lines {
		body := bytes.TrimSpace(line)
		lineOff := off
		off += int64(len(line))
		if len(body) == 0 || lineMessageID(body) != "" {
			continue // blank, or one of the bridge's own
		}
		l, err := inbox.ParseSeed002(body)
		if err == nil {
			err = inbox.ValidateAgent("from", l.From)
		}
		if err != nil {
			b.logError(team, member, st.Line+int64(i)+1, err, body)
			continue
		}
		sum := sha256.Sum256(body)
		in := inbox.SendInput{From: l.From, To: member, Content: l.SendContent(),
			Origin: &inbox.Origin{Descriptor: jsonlOrigin(team, member), SHA256: hex.EncodeToString(sum[:])}}
		// Where the line is (file and offset) and what it says: the same
		// line read again after a restart is the same message.
		in.IdempotencyKey = key("jsonl", team, member, strconv.FormatUint(st.Inode, 10), strconv.FormatInt(lineOff, 10), string(body))
		ins = append(ins, in)
		at = append(at, i)
	}
	if len(ins) > 0 {
		_, errs, err := b.cfg.Bus.SendBatch(ctx, ins)
		if err != nil {
			b.cfg.Log.Warn("team dir: take in lines", "team", team, "member", member, "error", err)
			return false
		}
		for j, err := range errs {
			if err != nil {
				b.logError(team, member, st.Line+int64(at[j])+1, err, bytes.TrimSpace(lines[at[j]]))
			}
		}
	}
	st.Offset = off
	st.Line += int64(len(lines))
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
