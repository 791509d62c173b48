package natsbus

import (
	"context"
	"encoding/json"
	"io"
	"time"

	"github.com/inbox-dev/inbox"
)

// SendBatch sends each input in turn: on JetStream every thread's
// creation is its own compare-and-set, so there is no one commit to share.
func (b *Bus) SendBatch(ins []inbox.SendInput) ([]*inbox.Result, []error, error) {
	results, errs := make([]*inbox.Result, len(ins)), make([]error, len(ins))
	for i, in := range ins {
		if in.ThreadID != "" {
			errs[i] = inbox.Invalid("thread", "must be empty: SendBatch only creates threads")
			continue
		}
		results[i], errs[i] = b.Send(in)
	}
	return results, errs, nil
}

// HeldLeases lists the unreleased leases of unfinished threads.
func (b *Bus) HeldLeases() ([]inbox.LeaseExpiry, error) {
	var out []inbox.LeaseExpiry
	err := b.threads(func(r *record) bool {
		l := r.Lease
		if l == nil || l.Released() || inbox.IsTerminal(r.Thread.Status) {
			return true
		}
		if exp, err := inbox.ParseTime(l.ExpiresAt); err == nil {
			out = append(out, inbox.LeaseExpiry{ThreadID: r.Thread.ThreadID, ExpiresAt: exp})
		}
		return true
	})
	return out, err
}

// ExpireLease releases a thread's lease if it has expired, as the
// directory store does (spool's ExpireLease).
func (b *Bus) ExpireLease(tid string) (bool, error) {
	_, err := b.mutate(tid, func(c *change) error {
		l := c.r.Lease
		t := &c.r.Thread
		if l == nil || l.Released() || inbox.IsTerminal(t.Status) || l.Live(c.now) {
			return errKeep
		}
		old := *l
		l.Release(l.ExpiresAt)
		from := t.Status
		if from != inbox.StatusBlocked {
			t.Status = inbox.StatusPending
			if len(t.Recipients) > 0 {
				t.AssignedTo = ""
			}
		}
		data, _ := json.Marshal(struct {
			Agent   string `json:"agent_id"`
			Token   int64  `json:"lease_token"`
			Expired string `json:"expired_at"`
			From    string `json:"from"`
			To      string `json:"to"`
		}{old.AgentID, old.LeaseToken, old.ExpiresAt, from, t.Status})
		c.r.Event = inbox.Event{EventType: inbox.EventLeaseExpired, Agent: old.AgentID,
			Summary: "lease of " + old.AgentID + " expired", PayloadJSON: data}
		return nil
	})
	if err == errKeep {
		return false, nil
	}
	return err == nil, err
}

// Tasks: none can exist on a NATS store until Push is built.
func (b *Bus) Tasks(f inbox.TaskFilter) ([]*inbox.Task, error) { return []*inbox.Task{}, nil }
func (b *Bus) TaskByName(name string) (*inbox.Task, error) {
	return nil, inbox.NotFound("task %s not found", name)
}
func (b *Bus) TaskByThread(tid string) (*inbox.Task, error) {
	return nil, inbox.NotFound("thread %s is not a task", tid)
}

// UnknownAgentWarnings: agent activity is not recorded on NATS yet, so
// there is nothing to warn from.
func (b *Bus) UnknownAgentWarnings(role, name string) []string { return nil }

// Waiting: presence is not recorded on NATS yet.
func (b *Bus) Waiting(agent string) (release func()) { return func() {} }

// What is not built yet on JetStream says so (docs/JETSTREAM.md).

func (b *Bus) Mailbox(agent, from string) ([]*inbox.MailItem, error) {
	return nil, unsupported("the mailbox")
}
func (b *Bus) MailPeek(agent string, newest int) (int, []*inbox.MailItem, error) {
	return 0, nil, unsupported("the mailbox")
}
func (b *Bus) Collect(agent, from string, lifo bool, max int) ([]*inbox.Message, error) {
	return nil, unsupported("the mailbox")
}
func (b *Bus) Receive(ctx context.Context, agent, from string, lifo bool, opt inbox.WaitOptions) (*inbox.Message, error) {
	return nil, unsupported("the mailbox")
}
func (b *Bus) Push(spec inbox.TaskSpec, prompt string) (*inbox.Task, error) {
	return nil, unsupported("the task queue")
}
func (b *Bus) CancelTask(agent string, t *inbox.Task, c inbox.Content) (*inbox.Result, error) {
	return nil, unsupported("the task queue")
}
func (b *Bus) SetTaskRunner(name string, r *inbox.TaskRunner) error {
	return unsupported("the task queue")
}
func (b *Bus) TaskOutputPath(name string) (string, error) { return "", unsupported("the task queue") }
func (b *Bus) StageBlob(field string, r io.Reader) (*inbox.Blob, error) {
	return nil, unsupported("blobs")
}
func (b *Bus) AdoptBlob(field, path string) (*inbox.Blob, error) { return nil, unsupported("blobs") }
func (b *Bus) OpenBlob(ref string) (io.ReadCloser, error)        { return nil, unsupported("blobs") }
func (b *Bus) CreateTeam(by, name string, members []string) (*inbox.Team, error) {
	return nil, unsupported("teams")
}
func (b *Bus) AddMembers(by, name string, members []string) (*inbox.Team, error) {
	return nil, unsupported("teams")
}
func (b *Bus) RemoveMembers(by, name string, members []string) (*inbox.Team, error) {
	return nil, unsupported("teams")
}
func (b *Bus) Team(name string) (*inbox.Team, error) { return nil, unsupported("teams") }
func (b *Bus) Teams() ([]*inbox.Team, error)         { return nil, unsupported("teams") }
func (b *Bus) Ack(agent, messageID, tid string, c inbox.Content) (*inbox.Result, error) {
	return nil, unsupported("acknowledgments")
}
func (b *Bus) Unacknowledged(agent string) ([]*inbox.Message, error) {
	return nil, unsupported("acknowledgments")
}
func (b *Bus) SessionMark(agent, session string) (string, error) {
	return "", unsupported("hook session marks")
}
func (b *Bus) SetSessionMark(agent, session, mark string) error {
	return unsupported("hook session marks")
}
func (b *Bus) Agents() ([]*inbox.AgentInfo, error) { return nil, unsupported("agents") }
func (b *Bus) LockDaemon(holder string) (func(), error) {
	return nil, unsupported("the daemon")
}
func (b *Bus) Fsck(repair bool) (*inbox.FsckReport, error) { return nil, unsupported("fsck") }
func (b *Bus) Reindex() (int, error)                       { return 0, unsupported("reindex") }
func (b *Bus) Archive(olderThan time.Duration, statuses []string) (*inbox.ArchiveResult, error) {
	return nil, unsupported("archive")
}
func (b *Bus) Stats() (*inbox.Stats, error) { return nil, unsupported("stats") }
