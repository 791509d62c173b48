package natsbus

import (
	"cmp"
	"context"
	"encoding/hex"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/inbox-dev/inbox"
)

// Reindex has nothing to rebuild on JetStream: fetch and list read each
// thread's newest record from the stream itself. It counts the threads.
func (b *Bus) Reindex(ctx context.Context) (int, error) {
	n := 0
	err := b.threads(ctx, func(*record) bool { n++; return true })
	return n, err
}

// Stats counts threads by status and assignee, and measures the stream.
func (b *Bus) Stats(ctx context.Context) (*inbox.Stats, error) {
	st := &inbox.Stats{ByStatus: map[string]int{}, ByAgent: map[string]map[string]int{}}
	err := b.threads(ctx, func(r *record) bool {
		t := r.Thread
		st.Count(&t)
		return true
	})
	if err != nil {
		return nil, err
	}
	rctx, cancel := b.ctx(ctx)
	defer cancel()
	info, err := b.stream.Info(rctx)
	if err != nil {
		return nil, inbox.Storage(err, "read the event log")
	}
	st.EventLogBytes = int64(info.State.Bytes)
	st.EventSegments = 1
	st.ArchivedThreads = b.archivedCount(ctx)
	st.LastEventID = int64(info.State.LastSeq)
	st.StoreBytes = st.EventLogBytes
	if kv, err := b.kv.Status(rctx); err == nil {
		st.StoreBytes += int64(kv.Bytes())
	}
	return st, nil
}

// staleAfter is how old a bucket record that names no committed thread
// must be before fsck calls it stale: younger, it may belong to a call
// still on its way to its commit.
const staleAfter = 10 * time.Minute

// Fsck checks the store's invariants: every record decodes; each thread's
// messages are numbered 1, 2, … and its state counts them; the bucket's
// idempotency keys and task names name threads that exist, and its
// collection marks name mail of their agent. repair deletes stale bucket
// records; the stream itself is never rewritten.
func (b *Bus) Fsck(ctx context.Context, repair bool) (*inbox.FsckReport, error) {
	rep := &inbox.FsckReport{Findings: []inbox.Finding{}}
	type thread struct{ count int }
	threads := map[string]*thread{}
	mail := map[string]map[int64]bool{} // agent (hex) → its mail's event ids
	var last uint64
	err := b.records(ctx, b.prefix+">", 1, false, func(r *record, seq uint64) bool {
		rep.Events++
		if seq <= last {
			rep.Findings = append(rep.Findings, inbox.Finding{Check: "event_order", Detail: fmt.Sprintf("event %d follows %d", seq, last)})
		}
		last = seq
		tid := r.Thread.ThreadID
		if tid == "" {
			return true
		}
		t := threads[tid]
		if t == nil {
			t = &thread{}
			threads[tid] = t
		}
		if m := r.Message; m != nil {
			rep.Messages++
			if m.Seq != t.count+1 || m.ThreadID != tid {
				rep.Findings = append(rep.Findings, inbox.Finding{Check: "missing_message", ThreadID: tid,
					Detail: fmt.Sprintf("event %d adds message %d after message %d", seq, m.Seq, t.count)})
			}
			t.count = m.Seq
			if !r.Prompt {
				for _, to := range inbox.RecipientsOf(m) {
					k := key(to)
					if mail[k] == nil {
						mail[k] = map[int64]bool{}
					}
					mail[k][int64(seq)] = true
				}
			}
		}
		if r.Thread.MessageCount != t.count {
			rep.Findings = append(rep.Findings, inbox.Finding{Check: "stale_header", ThreadID: tid,
				Detail: fmt.Sprintf("event %d counts %d messages; the thread has %d", seq, r.Thread.MessageCount, t.count)})
		}
		return true
	})
	if err != nil {
		return nil, err
	}
	rep.Threads = len(threads)
	rctx, cancel := b.ctx(ctx)
	defer cancel()
	lister, err := b.kv.ListKeys(rctx)
	if err != nil {
		return nil, inbox.Storage(err, "list the store's bucket")
	}
	var keys []string
	for k := range lister.Keys() {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	now := b.now()
	for _, k := range keys {
		parts := strings.Split(k, ".")
		var detail, check string
		switch parts[0] {
		case "idem", "task":
			e, err := b.kv.Get(rctx, k)
			if err != nil || now.Sub(e.Created()) < staleAfter {
				continue
			}
			var rec taskKey
			if jsonDecode(e.Value(), &rec) != nil || threads[rec.ThreadID] == nil {
				check = map[string]string{"idem": "stale_idempotency_record", "task": "stale_task"}[parts[0]]
				detail = "names thread " + rec.ThreadID + ", which was never created"
			}
		case "col":
			if len(parts) != 3 {
				continue
			}
			id, err := strconv.ParseInt(parts[2], 10, 64)
			if err == nil && mail[parts[1]][id] {
				continue
			}
			name, _ := hex.DecodeString(parts[1])
			check, detail = "stale_mailbox_entry", fmt.Sprintf("marks event %s collected by %s, which is no mail of %s", parts[2], name, name)
		}
		if check == "" {
			continue
		}
		f := inbox.Finding{Check: check, Path: k, Detail: detail}
		if repair && b.kv.Delete(rctx, k) == nil {
			f.Repaired = true
		}
		rep.Findings = append(rep.Findings, f)
	}
	slices.SortStableFunc(rep.Findings, func(x, y inbox.Finding) int { return cmp.Compare(x.Check, y.Check) })
	return rep, nil
}
