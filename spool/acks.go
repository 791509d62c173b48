package spool

import (
	"cmp"
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"slices"

	"github.com/inbox-dev/inbox"
)

// Acknowledgments (SPEC §10). A message that asks for acknowledgment
// (ack_id set) gets, for each recipient, a marker
//
//	acks/<agent>/<event id, 16 digits>~<from>~<thread id>~<seq>
//
// a hard link to the message file made in its commit beside the mailbox
// marker: what the agent still owes. An acknowledgment is a message of type
// acknowledgment from the agent in the same thread, whose content's
// "ackId" names the ack_id; once it commits, the marker goes. A marker
// left by a crash between the two is found by fsck (the thread holds the
// acknowledgment) and removed on repair; replay after a power cut makes
// the markers agree with the log.

const acksDir = "acks"

func (s *Store) ackPath(agent string) string { return filepath.Join(s.dir, acksDir, agent) }

// ackOf returns agent's acknowledgment of m in thread tid, nil if none.
func (s *Store) ackOf(tid string, m *inbox.Message, agent string) *inbox.Message {
	h, err := s.readHeader(tid)
	if err != nil {
		return nil
	}
	for seq := m.Seq + 1; seq <= h.MessageCount; seq++ {
		a, err := s.readMessage(tid, seq)
		if err == nil && a.FromAgent == agent && inbox.AckedID(a) == m.AckID {
			return a
		}
	}
	return nil
}

// dropAckMarker removes the marker an acknowledgment settles.
func (s *Store) dropAckMarker(tid string, ack *inbox.Message) error {
	id := inbox.AckedID(ack)
	if id == "" {
		return nil
	}
	for seq := ack.Seq - 1; seq >= 1; seq-- {
		m, err := s.readMessage(tid, seq)
		if err != nil || !inbox.WantsAck(m) || m.AckID != id {
			continue
		}
		err = os.Remove(filepath.Join(s.ackPath(ack.FromAgent), markerName(m)))
		if err != nil && !errors.Is(err, fs.ErrNotExist) {
			return inbox.Storage(err, "settle the acknowledgment of %s", m.MessageID)
		}
	}
	return nil
}

// owed lists the markers of agent's owed acknowledgments whose messages
// are committed, oldest first, with their messages.
func (s *Store) owed(agent string) ([]*mailEntry, error) {
	dir := s.ackPath(agent)
	entries, err := os.ReadDir(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, inbox.Storage(err, "list the acknowledgments %s owes", agent)
	}
	var out []*mailEntry
	for _, e := range entries {
		ev, _, tid, seq, ok := parseMarker(e.Name())
		if !ok {
			continue
		}
		p := filepath.Join(dir, e.Name())
		if !sameFile(p, filepath.Join(s.threadDir(tid), msgName(seq))) {
			continue // not (yet) committed
		}
		h, err := s.readHeader(tid)
		if err != nil || seq > h.MessageCount {
			continue
		}
		m, err := s.readMessage(tid, seq)
		if err != nil {
			continue
		}
		out = append(out, &mailEntry{MailItem: inbox.MailItem{Message: m}, marker: p, eventID: ev, tid: tid, seq: seq})
	}
	slices.SortFunc(out, func(a, b *mailEntry) int { return cmp.Compare(a.eventID, b.eventID) })
	return out, nil
}

// Unacknowledged lists the messages that asked agent for an
// acknowledgment it has not given, oldest first.
func (s *Store) Unacknowledged(ctx context.Context, agent string) ([]*inbox.Message, error) {
	if err := inbox.ValidateAgent("agent", agent); err != nil {
		return nil, err
	}
	items, err := s.owed(agent)
	if err != nil {
		return nil, err
	}
	out := []*inbox.Message{}
	for _, it := range items {
		out = append(out, it.Message)
	}
	return out, nil
}

// errAcked stops an acknowledgment that finds, under the thread's lock,
// that agent has acknowledged already.
type errAcked struct{ ack *inbox.Message }

func (e *errAcked) Error() string { return "acknowledged already" }

// Ack acknowledges, as agent, message messageID: an acknowledgment message
// (type acknowledgment, content {"ackId": …}) in the message's thread, to
// its sender. Without tid the message is looked for among those agent owes
// an acknowledgment. A second acknowledgment returns the first (Replayed).
func (s *Store) Ack(ctx context.Context, agent, messageID, tid string, c inbox.Content) (*inbox.Result, error) {
	if err := inbox.PrepareAck(agent, messageID, tid); err != nil {
		return nil, err
	}
	var m *inbox.Message
	if tid == "" {
		items, err := s.owed(agent)
		if err != nil {
			return nil, err
		}
		owed := make([]*inbox.Message, len(items))
		for i, it := range items {
			owed[i] = it.Message
		}
		if m, err = inbox.FindOwed(owed, agent, messageID); err != nil {
			return nil, err
		}
		tid = m.ThreadID
	} else {
		h, err := s.readHeader(tid)
		if err != nil {
			return nil, err
		}
		if m, err = s.findMessage(tid, h.MessageCount, messageID); errors.Is(err, inbox.ErrNotFound) {
			m, err = s.findAcked(tid, h.MessageCount, messageID, err)
		}
		if err != nil {
			return nil, err
		}
	}
	c, err := inbox.AckContent(m, agent, c)
	if err != nil {
		return nil, err
	}
	res, err := s.appendMessage(ctx, "ack", tid, agent, m.FromAgent, inbox.KindEvent, c, func(*inbox.Thread) error {
		if a := s.ackOf(tid, m, agent); a != nil {
			return &errAcked{a}
		}
		return nil
	}, true)
	var done *errAcked
	if errors.As(err, &done) {
		th, _ := s.Thread(ctx, tid)
		s.dropAckMarker(tid, done.ack)
		return &inbox.Result{Thread: th, Message: done.ack, Replayed: true}, nil
	}
	if err != nil {
		return nil, err
	}
	if !res.Replayed {
		if err := s.dropAckMarker(tid, res.Message); err != nil {
			return res, err
		}
	}
	return res, nil
}

// findAcked finds, in thread tid of count messages, the message that asks
// for acknowledgments naming ackID (its ack_id, which its sender may
// have chosen); notFound when none does.
func (s *Store) findAcked(tid string, count int, ackID string, notFound error) (*inbox.Message, error) {
	for seq := count; seq >= 1; seq-- {
		if m, err := s.readMessage(tid, seq); err == nil && inbox.AckNames(m, ackID) {
			return m, nil
		}
	}
	return nil, notFound
}
