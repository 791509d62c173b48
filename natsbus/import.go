package natsbus

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/inbox-dev/inbox"
)

// ImportResult says what Import copied.
type ImportResult struct {
	Events, Threads, Teams, Tasks, Keys, Collected int
	FirstEventID, LastEventID                      int64
}

// Import copies a store's history into db, a NATS store that must not
// exist yet: every event under its own event id (the stream starts at the
// first one), each thread's state as the events left it, and the bucket's
// records (store-wide idempotency keys, task names, collection marks, the
// fetch index). history calls its function with each event in order;
// collected lists, per agent, the event ids of the mail it collected.
func Import(ctx context.Context, db string, history func(fn func(*inbox.HistoryEntry) error) error, collected map[string][]int64) (*ImportResult, error) {
	res := &ImportResult{}
	var b *Bus
	states := map[string]*record{}
	teams := map[string]bool{}
	keys := map[string]newThreadKey{} // new-thread key → its record
	tasks := map[string][]string{}    // task name → its threads, oldest first
	next := int64(0)
	err := history(func(e *inbox.HistoryEntry) error {
		if b == nil {
			var err error
			if b, err = Open(ctx, db, Options{Create: true, FirstSeq: uint64(e.Event.EventID)}); err != nil {
				return err
			}
			if !b.created {
				return inbox.Errorf(inbox.ErrInvalidInput, "store_exists", "to", "%s holds a store already: migrate copies into a new one (name another)", b.shown)
			}
			res.FirstEventID, next = e.Event.EventID, e.Event.EventID
		}
		if e.Event.EventID != next {
			return inbox.Corrupt(nil, "the log jumps from event %d to %d: migrate copies a log without gaps (run inbox fsck)", next-1, e.Event.EventID)
		}
		r := &record{Event: e.Event}
		r.Event.EventID = 0
		subject := b.prefix + "x"
		switch {
		case e.Team != nil:
			r.Team = e.Team
			subject = b.teamSubject(e.Team.Name)
			teams[e.Team.Name] = true
		case e.Event.ThreadID != "":
			tid := e.Event.ThreadID
			prev := states[tid]
			if prev != nil {
				*r = *prev
				r.Event, r.Message, r.Prompt, r.Change, r.By = e.Event, nil, false, "", ""
				r.Event.EventID = 0
				r.Cursors = cloneMap(prev.Cursors)
			}
			if e.Thread != nil {
				r.Thread, r.Lease, r.From, r.Origin = *e.Thread, e.Lease, e.LastFrom, e.Origin
			} else if prev == nil {
				return inbox.Corrupt(nil, "event %d is the first of thread %s and carries no state", e.Event.EventID, tid)
			}
			r.Thread.LastEventID = 0
			if e.Event.EventType == inbox.EventThreadRead {
				var p struct {
					ID  string `json:"last_read_message_id"`
					Seq int    `json:"last_read_seq"`
				}
				json.Unmarshal(e.Event.PayloadJSON, &p)
				if r.Cursors == nil {
					r.Cursors = map[string]inbox.Cursor{}
				}
				r.Cursors[e.Event.Agent] = inbox.Cursor{ThreadID: tid, AgentID: e.Event.Agent, LastReadMessageID: p.ID, LastReadSeq: p.Seq, ReadAt: e.Event.CreatedAt}
			}
			if prev != nil {
				r.Owed = maps.Clone(prev.Owed)
			}
			c := &change{b: b, r: r}
			if m := e.Message; m != nil {
				msg := *m
				msg.EventID = 0
				r.Message = &msg
				c.settleAcks(&msg)
			}
			if k := e.Key; k != nil {
				if r.Idem == nil {
					r.Idem = map[string]idemRecord{}
				} else if prev != nil {
					r.Idem = cloneMap(prev.Idem)
				}
				r.Idem[idemHash(k.Key)] = idemRecord{Key: k.Key, Command: k.Command, MessageID: k.MessageID, Seq: k.Seq, Args: k.Args}
			}
			if e.Task != "" {
				r.Prompt = true
				tasks[e.Task] = append(tasks[e.Task], tid)
			}
			if e.NewThreadKey != "" {
				keys[e.NewThreadKey] = newThreadKey{Key: e.NewThreadKey, Command: "send", ThreadID: tid, Args: e.NewThreadArgs}
			}
			subject = b.eventSubject(r)
			rec := *r
			states[tid] = &rec
		}
		data, err := json.Marshal(r)
		if err != nil {
			return inbox.Internal(err)
		}
		var ack *jetstream.PubAck
		err = b.retry(ctx, func(ctx context.Context) (err error) {
			ack, err = b.js.Publish(ctx, subject, data, jetstream.WithExpectLastSequence(uint64(next-1)))
			return err
		})
		if err != nil {
			return inbox.Storage(err, "copy event %d", e.Event.EventID)
		}
		if int64(ack.Sequence) != e.Event.EventID {
			return inbox.Internal(fmt.Errorf("event %d was stored as %d", e.Event.EventID, ack.Sequence))
		}
		res.Events++
		next++
		return nil
	})
	if err != nil {
		return nil, err
	}
	if b == nil {
		if b, err = Open(ctx, db, Options{Create: true}); err != nil {
			return nil, err
		}
	}
	defer b.Close()
	res.LastEventID = next - 1
	res.Threads, res.Teams = len(states), len(teams)
	put := func(k string, v []byte) error {
		return b.retry(ctx, func(ctx context.Context) error {
			_, err := b.kv.Put(ctx, k, v)
			return err
		})
	}
	for k, rec := range keys {
		data, _ := json.Marshal(rec)
		if err := put("idem."+idemHash(k), data); err != nil {
			return nil, inbox.Storage(err, "copy idempotency keys")
		}
		res.Keys++
	}
	for name, tids := range tasks {
		// A name used again: the newest task holds it, the older ones are
		// its history, as a push that reused the name left them.
		for i, tid := range tids {
			data, _ := json.Marshal(taskKey{ThreadID: tid})
			k := "task." + key(name)
			if i < len(tids)-1 {
				k = doneKey(name, tid)
			}
			if err := put(k, data); err != nil {
				return nil, inbox.Storage(err, "copy task names")
			}
			res.Tasks++
		}
	}
	for agent, ids := range collected {
		for _, id := range ids {
			if err := put("col."+key(agent)+"."+strconv.FormatInt(id, 10), []byte("migrated")); err != nil {
				return nil, inbox.Storage(err, "copy collected mail")
			}
			res.Collected++
		}
	}
	for tid, r := range states {
		for _, o := range owners(&r.Thread) {
			if err := b.index(ctx, o, tid, true); err != nil {
				return nil, err
			}
		}
	}
	return res, nil
}

// History calls fn with every event of the store, in order, with what it
// carried: the store's history, for copying it elsewhere (inbox migrate).
func (b *Bus) History(ctx context.Context, fn func(e *inbox.HistoryEntry) error) error {
	keys := map[string]newThreadKey{} // thread → the key of the send that made it
	err := b.retry(ctx, func(ctx context.Context) error {
		l, err := b.kv.ListKeysFiltered(ctx, "idem.*")
		if err != nil {
			return err
		}
		for k := range l.Keys() {
			if e, err := b.kv.Get(ctx, k); err == nil {
				var rec newThreadKey
				if json.Unmarshal(e.Value(), &rec) == nil {
					keys[rec.ThreadID] = rec
				}
			}
		}
		return nil
	})
	if err != nil {
		return inbox.Storage(err, "read idempotency keys")
	}
	// Archived threads' events, merged back in by event id: the copy
	// holds them live.
	var old []*record
	if arch, err := b.archive(ctx, false); err != nil {
		return err
	} else if arch != nil {
		for seq := uint64(1); ; {
			var m *jetstream.RawStreamMsg
			err := b.retry(ctx, func(ctx context.Context) (err error) {
				m, err = arch.GetMsg(ctx, seq, jetstream.WithGetMsgSubject("inbox."+b.name+".arch.>"))
				return err
			})
			if errors.Is(err, jetstream.ErrMsgNotFound) {
				break
			}
			if err != nil {
				return inbox.Storage(err, "read the archive")
			}
			var r record
			if err := json.Unmarshal(m.Data, &r); err != nil {
				return inbox.Corrupt(err, "the archive holds a record that is not JSON")
			}
			old = append(old, &r)
			seq = m.Sequence + 1
		}
		slices.SortFunc(old, func(x, y *record) int { return cmp.Compare(x.Event.EventID, y.Event.EventID) })
	}
	prevIdem := map[string]map[string]idemRecord{}
	var ferr error
	emit := func(r *record) bool {
		e := &inbox.HistoryEntry{Event: r.Event, Team: r.Team}
		if tid := r.Thread.ThreadID; tid != "" {
			t := r.Thread
			e.Thread, e.Lease, e.LastFrom, e.Origin, e.Message = &t, r.Lease, r.From, r.Origin, r.Message
			if m := r.Message; m != nil && m.Seq == 1 {
				e.NewThreadKey, e.NewThreadArgs = keys[tid].Key, keys[tid].Args
				if r.Prompt {
					var p struct {
						Task inbox.TaskSpec `json:"task"`
					}
					if json.Unmarshal(m.PayloadJSON, &p) == nil {
						e.Task = p.Task.Name
					}
				}
			}
			for h, k := range r.Idem {
				if _, had := prevIdem[tid][h]; !had {
					e.Key = &inbox.IdempotencyUse{Key: k.Key, Command: k.Command, MessageID: k.MessageID, Seq: k.Seq, Args: k.Args}
				}
			}
			prevIdem[tid] = r.Idem
		}
		ferr = fn(e)
		return ferr == nil
	}
	err = b.records(ctx, b.prefix+">", 1, false, func(r *record, seq uint64) bool {
		for len(old) > 0 && old[0].Event.EventID < int64(seq) {
			if !emit(old[0]) {
				return false
			}
			old = old[1:]
		}
		return emit(r)
	})
	for ferr == nil && err == nil && len(old) > 0 {
		emit(old[0])
		old = old[1:]
	}
	if ferr != nil {
		return ferr
	}
	return err
}

// Collected lists, per agent, the event ids of the mail it has collected.
func (b *Bus) Collected(ctx context.Context) (map[string][]int64, error) {
	out := map[string][]int64{}
	err := b.retry(ctx, func(ctx context.Context) error {
		l, err := b.kv.ListKeysFiltered(ctx, "col.>")
		if err != nil {
			return err
		}
		for k := range l.Keys() {
			name, rest, ok := agentKey(k)
			id, err := strconv.ParseInt(rest, 10, 64)
			if ok && err == nil {
				out[name] = append(out[name], id)
			}
		}
		return nil
	})
	return out, inbox.Storage(err, "read collected mail")
}
