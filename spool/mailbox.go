package spool

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/inbox-dev/inbox"
)

// Mailboxes (SPEC §7). Every message addressed to an agent gets a marker
//
//	mailbox/<agent>/<event id, 16 digits>~<from>~<thread id>~<seq>
//
// a hard link to the message file, made in the message's commit before its
// commit point. Collecting a message renames its marker into
// mailbox/<agent>/.collected/: a rename succeeds for exactly one of any
// number of concurrent collectors, so a message is collected at most once.
// A marker whose message was never committed (a crash) is recognised and
// dropped: its inode is not the thread's message at that seq, or the seq is
// past the thread's message count.

const collectedDir = ".collected"

// mailEntry is a mail item as the mailbox directory has it: its marker
// file, and the event, thread and seq the marker's name gives.
type mailEntry struct {
	inbox.MailItem
	marker  string
	eventID int64
	tid     string
	seq     int
}

// sortMail orders a mailbox as receive and check hand it out: high
// priority first, oldest first within a priority (newest first with lifo).
func sortMail(items []*mailEntry, lifo bool) {
	slices.SortStableFunc(items, func(a, b *mailEntry) int {
		return inbox.CompareMail(a.Priority, a.eventID, b.Priority, b.eventID, lifo)
	})
}

func (s *Store) mailboxPath(agent string) string { return filepath.Join(s.dir, mailboxDir, agent) }

func markerName(m *inbox.Message) string {
	return fmt.Sprintf("%016d~%s~%s~%d", m.EventID, m.FromAgent, m.ThreadID, m.Seq)
}

// deliver links src (the message's file) into each recipient's mailbox
// and, when the message asks for acknowledgment, into each one's
// acks/<agent>/ (see acks.go), except where skip (when set) says the
// recipient's mail (ack false) or acknowledgment (ack true) needs no
// marker. It returns the markers it made.
func (s *Store) deliver(m *inbox.Message, src string, skip func(agent string, ack bool) bool) ([]string, error) {
	var made []string
	name := markerName(m)
	for _, to := range inbox.RecipientsOf(m) {
		if skip == nil || !skip(to, false) {
			p, err := s.linkMarker(s.mailboxPath(to), name, src, true)
			if err != nil {
				return made, inbox.Storage(err, "deliver to %s", to)
			}
			made = append(made, p)
		}
		if inbox.WantsAck(m) && (skip == nil || !skip(to, true)) {
			p, err := s.linkMarker(s.ackPath(to), name, src, false)
			if err != nil {
				return made, inbox.Storage(err, "record the acknowledgment %s owes", to)
			}
			made = append(made, p)
		}
	}
	return made, nil
}

// linkMarker links src as dir/name, making dir (and, for a mailbox, its
// .collected/) when it is new.
func (s *Store) linkMarker(dir, name, src string, mailbox bool) (string, error) {
	if err := refuseLink(dir); err != nil {
		return "", err
	}
	p := filepath.Join(dir, name)
	err := os.Link(src, p)
	if errors.Is(err, fs.ErrNotExist) {
		dirs := []string{filepath.Dir(dir), dir}
		if mailbox {
			dirs = append(dirs, filepath.Join(dir, collectedDir))
		}
		for _, d := range dirs {
			if err := os.Mkdir(d, s.dirMode); err != nil && !errors.Is(err, fs.ErrExist) {
				return "", err
			}
		}
		// A new mailbox's directories are made durable now (once per
		// agent): what collecting records in .collected/ must survive a
		// power cut, or replay would hand the mail out again.
		if mailbox && !s.unsynced {
			for _, d := range []string{s.dir, filepath.Dir(dir), dir} {
				if err := syncDir(d); err != nil {
					return "", err
				}
			}
		}
		err = os.Link(src, p)
	}
	if err != nil && !errors.Is(err, fs.ErrExist) {
		return "", err
	}
	return p, nil
}

// parseMarker reads event id, sender, thread and seq from a marker name.
func parseMarker(name string) (ev int64, from, tid string, seq int, ok bool) {
	parts := strings.Split(name, "~")
	if len(parts) != 4 {
		return 0, "", "", 0, false
	}
	ev, err1 := strconv.ParseInt(parts[0], 10, 64)
	seq, err2 := strconv.Atoi(parts[3])
	if err1 != nil || err2 != nil || inbox.ValidateID("thread", parts[2]) != nil {
		return 0, "", "", 0, false
	}
	return ev, parts[1], parts[2], seq, true
}

// Mailbox lists what waits in agent's mailbox (only from sender, if
// given), in the order receive hands it out (high priority first, then
// oldest), without collecting anything.
func (s *Store) Mailbox(ctx context.Context, agent, from string) ([]*inbox.MailItem, error) {
	items, err := s.mailItems(agent, from, true)
	if err != nil {
		return nil, err
	}
	out := []*inbox.MailItem{}
	for _, it := range items {
		if s.load(it) == nil {
			out = append(out, &it.MailItem)
		}
	}
	return out, nil
}

// MailPeek counts agent's mailbox by its markers' names and reads only
// the newest messages, newest first: what a hook can afford on every stop
// of an agent with a thousand uncollected messages. Only the markers it
// reads are checked against their threads, so the count may include the
// marker of a send still committing, or of one a crash cut short (fsck
// removes those); a peek whose newest markers are all such counts none.
func (s *Store) MailPeek(ctx context.Context, agent string, newest int) (int, []*inbox.MailItem, error) {
	if err := inbox.ValidateAgent("agent", agent); err != nil {
		return 0, nil, err
	}
	dir := s.mailboxPath(agent)
	items := []*inbox.MailItem{}
	f, err := os.Open(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return 0, items, nil // no mail was ever delivered to agent
	}
	if err != nil {
		return 0, nil, inbox.Storage(err, "list the mailbox of %s", agent)
	}
	entries, err := f.Readdirnames(-1)
	f.Close()
	if err != nil {
		return 0, nil, inbox.Storage(err, "list the mailbox of %s", agent)
	}
	// A marker's name starts with its event id, 16 digits: names order
	// as events do. Only the newest names are parsed and checked.
	markers := entries[:0]
	for _, n := range entries {
		if len(n) > 17 && n[16] == '~' {
			markers = append(markers, n)
		}
	}
	total := len(markers)
	newest = max(newest, 1)
	if newest == 1 && len(markers) > 1 {
		i := slices.Index(markers, slices.Max(markers))
		last := len(markers) - 1
		markers[i], markers[last] = markers[last], markers[i]
	} else {
		slices.Sort(markers)
	}
	for i := len(markers) - 1; i >= 0 && len(items) < newest; i-- {
		if newest == 1 && i == len(markers)-2 {
			slices.Sort(markers[:i+1]) // the newest was not there: order the rest
		}
		ev, _, tid, seq, ok := parseMarker(markers[i])
		if !ok {
			total--
			continue
		}
		it := &mailEntry{marker: filepath.Join(dir, markers[i]), eventID: ev, tid: tid, seq: seq}
		h, err := s.readHeader(it.tid)
		if err != nil || it.seq > h.MessageCount || !sameFile(it.marker, filepath.Join(s.threadDir(it.tid), msgName(it.seq))) || s.load(it) != nil {
			total--
			continue
		}
		it.Priority = h.Priority
		items = append(items, &it.MailItem)
	}
	if len(items) == 0 {
		total = 0 // nothing the newest markers name is there: no mail to speak of
	}
	return total, items, nil
}

// mailItems lists the committed messages waiting in agent's mailbox, in
// receive's order, from the markers' names and the threads' headers: the
// messages themselves are not read (load reads one). Without check, a
// marker is not yet compared with its message's file (committed): the
// caller does so for the ones it takes (see committed).
func (s *Store) mailItems(agent, from string, check bool) ([]*mailEntry, error) {
	if err := inbox.ValidateAgent("agent", agent); err != nil {
		return nil, err
	}
	if from != "" {
		if err := inbox.ValidateAgent("from", from); err != nil {
			return nil, err
		}
	}
	dir := s.mailboxPath(agent)
	if !exists(dir) {
		return []*mailEntry{}, nil
	}
	entries, err := names(dir, "mailbox of "+agent)
	if err != nil {
		return nil, err
	}
	items := []*mailEntry{}
	type threadInfo struct {
		count    int // committed messages
		priority string
	}
	threads := map[string]threadInfo{}
	for _, n := range entries {
		ev, sender, tid, seq, ok := parseMarker(n)
		if !ok || (from != "" && sender != from) {
			continue
		}
		p := filepath.Join(dir, n)
		ti, seen := threads[tid]
		if !seen {
			if h, err := s.readHeader(tid); err == nil {
				ti = threadInfo{h.MessageCount, h.Priority}
			}
			threads[tid] = ti
		}
		it := &mailEntry{MailItem: inbox.MailItem{Priority: ti.priority}, marker: p, eventID: ev, tid: tid, seq: seq}
		if seq > ti.count || (check && !s.committed(it)) {
			continue // not (yet) committed
		}
		items = append(items, it)
	}
	sortMail(items, false)
	return items, nil
}

// mailDepth counts agent's committed mail, as len(mailItems(agent, "",
// true)) would, for inbox agents (and the dashboard, which asks on every
// change): a marker of a thread's first message that is that message's
// file is committed whatever the header says, since that file at its name
// is the thread's commit point, so only the markers of later messages
// need their thread's header; and since a thread id is never used twice,
// that file being there is enough. On a store of 100,000 threads, each with its
// first message uncollected, this reads no thread header at all.
func (s *Store) mailDepth(agent string) (int, error) {
	if err := inbox.ValidateAgent("agent", agent); err != nil {
		return 0, err
	}
	dir := s.mailboxPath(agent)
	if !exists(dir) {
		return 0, nil
	}
	entries, err := names(dir, "mailbox of "+agent)
	if err != nil {
		return 0, err
	}
	counts := map[string]int{} // committed messages, by thread
	n := 0
	for _, name := range entries {
		_, _, tid, seq, ok := parseMarker(name)
		if !ok {
			continue
		}
		if seq > 1 {
			c, seen := counts[tid]
			if !seen {
				if h, err := s.readHeader(tid); err == nil {
					c = h.MessageCount
				}
				counts[tid] = c
			}
			if seq > c {
				continue // not (yet) committed
			}
		}
		if seq == 1 {
			// A thread id is never used twice, so the thread's first
			// message being there is this marker's message committed:
			// one stat instead of the two sameFile takes.
			if exists(filepath.Join(s.threadDir(tid), msgName(1))) {
				n++
			}
			continue
		}
		if s.committed(&mailEntry{marker: filepath.Join(dir, name), tid: tid, seq: seq}) {
			n++
		}
	}
	return n, nil
}

// committed reports whether an item's marker is its message's file: a
// marker a send made before its commit point, that the send never got
// past, is not.
func (s *Store) committed(it *mailEntry) bool {
	return sameFile(it.marker, filepath.Join(s.threadDir(it.tid), msgName(it.seq)))
}

// load reads an item's message.
func (s *Store) load(it *mailEntry) error {
	if it.Message != nil {
		return nil
	}
	m, err := s.readMessage(it.tid, it.seq)
	if err != nil {
		return err
	}
	it.Message, it.DeliveredAt = m, m.CreatedAt
	return nil
}

func sameFile(a, b string) bool {
	fa, err := os.Stat(a)
	if err != nil {
		return false
	}
	fb, err := os.Stat(b)
	return err == nil && os.SameFile(fa, fb)
}

// Collect takes up to max messages (all, when max <= 0) from agent's
// mailbox, high priority first and oldest first within a priority (newest
// first with lifo), only from sender when from is set. Each is collected
// by exactly one caller, however many collect at once; the messages stay
// in their threads.
func (s *Store) Collect(ctx context.Context, agent, from string, lifo bool, max int) ([]*inbox.Message, error) {
	if s.linkErr != nil {
		return nil, s.linkErr
	}
	items, err := s.mailItems(agent, from, false)
	if err != nil {
		return nil, err
	}
	s.seen(agent)
	if lifo {
		sortMail(items, true)
	}
	dst := filepath.Join(s.mailboxPath(agent), collectedDir)
	out := []*inbox.Message{}
	renamed := false
	for _, it := range items {
		if !s.committed(it) {
			continue // a send's marker before its commit point
		}
		if s.load(it) != nil {
			continue // damaged: fsck --repair sets it aside
		}
		err := os.Rename(it.marker, filepath.Join(dst, filepath.Base(it.marker)))
		if errors.Is(err, fs.ErrNotExist) {
			continue // another receiver collected it first
		}
		if err != nil {
			return out, inbox.Storage(err, "collect from the mailbox of %s", agent)
		}
		renamed = true
		out = append(out, it.Message)
		if max > 0 && len(out) == max {
			break
		}
	}
	if renamed && !s.unsynced {
		// Durable: a collected message must not come back after a crash.
		if err := syncDir(s.mailboxPath(agent)); err != nil {
			return out, err
		}
		if err := syncDir(dst); err != nil {
			return out, err
		}
	}
	for _, m := range out {
		s.moveCursor(ctx, agent, m)
	}
	return out, nil
}

// Receive waits until agent's mailbox holds a message (from sender, when
// set), collects it and returns it; nil when the wait timed out.
func (s *Store) Receive(ctx context.Context, agent, from string, lifo bool, opt inbox.WaitOptions) (*inbox.Message, error) {
	deadline := time.Now().Add(opt.Timeout)
	opt.Agent = agent
	var got *inbox.Message
	_, err := s.waitLoop(ctx, deadline, opt, func(bool) (bool, error) {
		msgs, err := s.Collect(ctx, agent, from, lifo, 1)
		if len(msgs) == 1 {
			got = msgs[0]
		}
		return got != nil, err
	})
	return got, err
}
