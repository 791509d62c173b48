package natsbus

import (
	"context"

	"github.com/inbox-dev/inbox"
)

// One model of reading (SPEC §7): an agent's read cursor on a thread and
// its mailbox are two views of one fact. A claim, done, fail or cancel
// moves its agent's cursor to the thread's newest message in the change
// itself, and a mark-read moves it by its own change; either then
// collects the agent's mail of the thread up to the cursor. A collect
// moves the cursor to the message collected.

// readAll moves agent's read cursor, in the change, to the thread's newest
// message.
func (c *change) readAll(agent string) {
	t := &c.r.Thread
	if t.MessageCount == 0 {
		return
	}
	c.r.Cursors[agent] = inbox.Cursor{ThreadID: t.ThreadID, AgentID: agent, LastReadMessageID: t.LatestMessageID,
		LastReadSeq: t.MessageCount, ReadAt: inbox.FormatTime(c.now)}
}

// readResult returns what passes a change's result on after collecting
// what the change read for agent: a claim (no message) or a finish by
// agent reads the thread up to its newest message (see readAll); a
// progress step, or a change whose message speaks for someone else (see
// transition), reads nothing.
func (b *Bus) readResult(ctx context.Context, agent string) func(*inbox.Result, error) (*inbox.Result, error) {
	return func(res *inbox.Result, err error) (*inbox.Result, error) {
		if err != nil || res == nil || res.Thread == nil {
			return res, err
		}
		if m := res.Message; m == nil || (m.FromAgent == agent && inbox.IsTerminal(res.Thread.Status)) {
			b.collectRead(ctx, agent, res.Thread.ThreadID, res.Thread.MessageCount)
		}
		return res, err
	}
}

// collectRead collects agent's mail of thread tid up to message upTo: what
// the agent has read in the thread. A failure leaves mail that was read
// in the mailbox, never loses any: the read itself stands.
func (b *Bus) collectRead(ctx context.Context, agent, tid string, upTo int) {
	recs, err := b.threadRecords(ctx, tid)
	if err != nil {
		return
	}
	for _, r := range recs {
		if delivered(r, agent) && r.Message.Seq <= upTo {
			b.retry(ctx, func(ctx context.Context) error {
				_, err := b.kv.Create(ctx, collectedKey(agent, r.Message.EventID), []byte(inbox.FormatTime(b.now())))
				return err
			})
		}
	}
}
