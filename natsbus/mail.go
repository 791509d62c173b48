package natsbus

import (
	"cmp"
	"context"
	"errors"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/inbox-dev/inbox"
)

// Mailboxes (SPEC §7). A message to one agent is published on a subject
// whose <to> token is that agent, a message to several on "_m": an
// agent's mail is what those subjects hold for it. Collecting a message is
// creating the key col.<agent>.<event id> in the store's bucket, which
// succeeds for exactly one of any number of collectors.

func (b *Bus) mailSubjects(agent string) []string {
	return []string{b.prefix + "t.*." + token(agent) + ".*", b.prefix + "t.*._m.*"}
}

func collectedKey(agent string, id int64) string {
	return "col." + key(agent) + "." + strconv.FormatInt(id, 10)
}

// delivered reports whether r carries a message delivered to agent.
func delivered(r *record, agent string) bool {
	return r.Message != nil && !r.Prompt && contains(inbox.RecipientsOf(r.Message), agent)
}

// mailEntry is one message delivered to an agent.
type mailEntry struct {
	inbox.MailItem
	id int64
}

// mail lists every message ever delivered to agent (from sender, when
// set), oldest first.
func (b *Bus) mail(ctx context.Context, agent, from string) ([]*mailEntry, error) {
	var out []*mailEntry
	err := b.recordsOf(ctx, b.mailSubjects(agent), 1, false, func(r *record, seq uint64) bool {
		if delivered(r, agent) && (from == "" || r.Message.FromAgent == from) {
			out = append(out, &mailEntry{MailItem: inbox.MailItem{Message: r.Message, DeliveredAt: r.Message.CreatedAt,
				Priority: r.Thread.Priority}, id: int64(seq)})
		}
		return true
	})
	return out, err
}

// collected is the set of agent's collected event ids.
func (b *Bus) collected(ctx context.Context, agent string) (map[int64]bool, error) {
	prefix := "col." + key(agent) + "."
	out := map[int64]bool{}
	err := b.retry(ctx, func(ctx context.Context) error {
		l, err := b.kv.ListKeysFiltered(ctx, prefix+"*")
		if err != nil {
			return err
		}
		for k := range l.Keys() {
			if id, err := strconv.ParseInt(strings.TrimPrefix(k, prefix), 10, 64); err == nil {
				out[id] = true
			}
		}
		return nil
	})
	if err != nil {
		return nil, inbox.Storage(err, "read the mailbox of %s", agent)
	}
	return out, nil
}

// waiting lists agent's uncollected mail in receive's order: high
// priority first, then oldest (newest with lifo).
func (b *Bus) waiting(ctx context.Context, agent, from string, lifo bool) ([]*mailEntry, error) {
	if err := inbox.ValidateAgent("agent", agent); err != nil {
		return nil, err
	}
	if from != "" {
		if err := inbox.ValidateAgent("from", from); err != nil {
			return nil, err
		}
	}
	all, err := b.mail(ctx, agent, from)
	if err != nil {
		return nil, err
	}
	done, err := b.collected(ctx, agent)
	if err != nil {
		return nil, err
	}
	items := slices.DeleteFunc(all, func(e *mailEntry) bool { return done[e.id] })
	slices.SortStableFunc(items, func(x, y *mailEntry) int { return inbox.CompareMail(x.Priority, x.id, y.Priority, y.id, lifo) })
	return items, nil
}

// Mailbox lists agent's uncollected mail, collecting nothing.
func (b *Bus) Mailbox(ctx context.Context, agent, from string) ([]*inbox.MailItem, error) {
	items, err := b.waiting(ctx, agent, from, false)
	if err != nil {
		return nil, err
	}
	out := []*inbox.MailItem{}
	for _, it := range items {
		out = append(out, &it.MailItem)
	}
	return out, nil
}

// MailPeek counts agent's uncollected mail and returns the newest.
func (b *Bus) MailPeek(ctx context.Context, agent string, newest int) (int, []*inbox.MailItem, error) {
	items, err := b.waiting(ctx, agent, "", false)
	if err != nil {
		return 0, nil, err
	}
	slices.SortFunc(items, func(x, y *mailEntry) int { return cmp.Compare(y.id, x.id) })
	out := []*inbox.MailItem{}
	for _, it := range items[:min(len(items), max(newest, 1))] {
		out = append(out, &it.MailItem)
	}
	return len(items), out, nil
}

// Collect collects up to max (all, when max <= 0) of agent's messages:
// each goes to exactly one collector.
func (b *Bus) Collect(ctx context.Context, agent, from string, lifo bool, max int) ([]*inbox.Message, error) {
	items, err := b.waiting(ctx, agent, from, lifo)
	if err != nil {
		return nil, err
	}
	b.seen(ctx, agent)
	out := []*inbox.Message{}
	for _, it := range items {
		err := b.retry(ctx, func(ctx context.Context) error {
			_, err := b.kv.Create(ctx, collectedKey(agent, it.id), []byte(inbox.FormatTime(b.now())))
			return err
		})
		if errors.Is(err, jetstream.ErrKeyExists) {
			continue // another collector took it first
		}
		if err != nil {
			return out, inbox.Storage(err, "collect from the mailbox of %s", agent)
		}
		out = append(out, it.Message)
		if max > 0 && len(out) == max {
			break
		}
	}
	for _, m := range out {
		// Collected is read (SPEC §7); the collect stands whatever
		// happens to the cursor.
		b.moveCursor(ctx, agent, m.ThreadID, m.Seq)
	}
	return out, nil
}

// Receive waits until agent's mailbox holds a message (from sender, when
// set), collects it and returns it; nil when the wait timed out. It
// follows the agent's mail subjects from before its first look, so a
// message that lands in between wakes it.
func (b *Bus) Receive(ctx context.Context, agent, from string, lifo bool, opt inbox.WaitOptions) (*inbox.Message, error) {
	deadline := time.Now().Add(opt.Timeout)
	last, err := b.LastEventID(ctx)
	if err != nil {
		return nil, err
	}
	var fl *follower
	defer func() {
		if fl != nil {
			fl.close()
		}
	}()
	for {
		got, err := b.Collect(ctx, agent, from, lifo, 1)
		if err != nil || len(got) == 1 {
			if len(got) == 1 {
				return got[0], err
			}
			return nil, err
		}
		if opt.Timeout <= 0 {
			return nil, nil
		}
		if fl == nil {
			if fl, err = b.followAll(ctx, b.mailSubjects(agent), uint64(last)+1); err != nil {
				return nil, err
			}
			release := b.Waiting(ctx, agent)
			defer release()
		}
		for {
			r, _, ok, err := fl.next(ctx, deadline)
			if err != nil {
				return nil, err
			}
			if !ok {
				return nil, nil
			}
			if delivered(r, agent) && (from == "" || r.Message.FromAgent == from) {
				break
			}
		}
	}
}

// Acknowledgments (SPEC §10). A message sent with ack_required records,
// in its thread's state, that each recipient owes an acknowledgment
// (Owed); the recipient's acknowledgment, a message in the same thread,
// removes it in the same commit.

// owedAck is one acknowledgment an agent owes: the message and its ack id.
type owedAck struct {
	MessageID string `json:"message_id"`
	AckID     string `json:"ack_id"`
}

// settleAcks records what message m, just added, asks and settles.
func (c *change) settleAcks(m *inbox.Message) {
	if inbox.WantsAck(m) {
		if c.r.Owed == nil {
			c.r.Owed = map[string][]owedAck{}
		}
		for _, to := range inbox.RecipientsOf(m) {
			c.r.Owed[to] = append(slices.Clone(c.r.Owed[to]), owedAck{m.MessageID, m.AckID})
		}
	}
	if id := inbox.AckedID(m); id != "" && len(c.r.Owed[m.FromAgent]) > 0 {
		left := slices.DeleteFunc(slices.Clone(c.r.Owed[m.FromAgent]), func(o owedAck) bool { return o.AckID == id })
		if len(left) == 0 {
			delete(c.r.Owed, m.FromAgent)
		} else {
			c.r.Owed[m.FromAgent] = left
		}
	}
}

func (r *record) owes(agent, messageID string) bool {
	return slices.ContainsFunc(r.Owed[agent], func(o owedAck) bool { return o.MessageID == messageID })
}

// Unacknowledged lists the messages that asked agent for an
// acknowledgment it has not given, oldest first.
func (b *Bus) Unacknowledged(ctx context.Context, agent string) ([]*inbox.Message, error) {
	if err := inbox.ValidateAgent("agent", agent); err != nil {
		return nil, err
	}
	all, err := b.mail(ctx, agent, "")
	if err != nil {
		return nil, err
	}
	states := map[string]*record{}
	out := []*inbox.Message{}
	for _, e := range all {
		m := e.Message
		if !inbox.WantsAck(m) {
			continue
		}
		st, ok := states[m.ThreadID]
		if !ok {
			if st, _, err = b.state(ctx, m.ThreadID); err != nil {
				return nil, err
			}
			states[m.ThreadID] = st
		}
		if st.owes(agent, m.MessageID) {
			out = append(out, m)
		}
	}
	return out, nil
}

// Ack acknowledges, as agent, message messageID (SPEC §10): an
// acknowledgment message in its thread, to its sender. A second
// acknowledgment returns the first (Replayed).
func (b *Bus) Ack(ctx context.Context, agent, messageID, tid string, c inbox.Content) (*inbox.Result, error) {
	if err := inbox.PrepareAck(agent, messageID, tid); err != nil {
		return nil, err
	}
	var m *inbox.Message
	if tid == "" {
		owed, err := b.Unacknowledged(ctx, agent)
		if err != nil {
			return nil, err
		}
		if m, err = inbox.FindOwed(owed, agent, messageID); err != nil {
			return nil, err
		}
		tid = m.ThreadID
	} else {
		recs, err := b.threadRecords(ctx, tid)
		if err != nil {
			return nil, err
		}
		for _, x := range messagesOf(recs) {
			if inbox.AckNames(x, messageID) {
				m = x
			}
		}
		if m == nil {
			return nil, inbox.MessageNotFound(messageID, tid)
		}
	}
	c, err := inbox.AckContent(m, agent, c)
	if err != nil {
		return nil, err
	}
	res, err := b.appendMessage(ctx, "ack", tid, agent, m.FromAgent, inbox.KindEvent, c, func(r *record) error {
		if !r.owes(agent, m.MessageID) {
			return errAcked
		}
		return nil
	}, true)
	if errors.Is(err, errAcked) {
		recs, err := b.threadRecords(ctx, tid)
		if err != nil {
			return nil, err
		}
		for _, x := range messagesOf(recs) {
			if x.FromAgent == agent && inbox.AckedID(x) == m.AckID {
				return &inbox.Result{Thread: recs[len(recs)-1].view(b.now()), Message: x, Replayed: true}, nil
			}
		}
		return nil, inbox.InvalidState("%s owes no acknowledgment of message %s", agent, messageID)
	}
	return res, err
}

var errAcked = errors.New("acknowledged already")
