package natsbus

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/inbox-dev/inbox"
)

// Archive. Finished threads older than a cutoff move out of the live
// stream, as they move out of a directory's live tree: their events are
// copied, with their event ids, to the stream INBOX_NAME_ARCHIVE (subject
// inbox.NAME.arch.t.<thread>) and then purged from the live stream. List,
// fetch and stats no longer see them; show still does (read-only); a
// change of one is refused. A crash between the copy and the purge leaves
// the thread in both: the next archive copies it again from scratch.

func (b *Bus) archiveStreamName() string { return b.streamName() + "_ARCHIVE" }

func (b *Bus) archiveSubject(tid string) string { return "inbox." + b.name + ".arch.t." + tid }

// archive opens the archive stream (create: makes it if there is none;
// nil, nil when there is none).
func (b *Bus) archive(ctx context.Context, create bool) (jetstream.Stream, error) {
	if b.archiveStream != nil {
		return b.archiveStream, nil
	}
	var s jetstream.Stream
	err := b.retry(ctx, func(ctx context.Context) (err error) {
		s, err = b.js.Stream(ctx, b.archiveStreamName())
		if errors.Is(err, jetstream.ErrStreamNotFound) && create {
			s, err = b.js.CreateOrUpdateStream(ctx, jetstream.StreamConfig{Name: b.archiveStreamName(),
				Description: "inbox store " + b.name + ": archived threads",
				Subjects:    []string{"inbox." + b.name + ".arch.>"}, Storage: jetstream.FileStorage, Replicas: b.replicas})
		}
		return err
	})
	if errors.Is(err, jetstream.ErrStreamNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, inbox.Storage(err, "open the archive")
	}
	b.archiveStream = s
	return s, nil
}

// archived reads an archived thread's records (nil when it is not archived).
func (b *Bus) archived(ctx context.Context, tid string) ([]*record, error) {
	s, err := b.archive(ctx, false)
	if err != nil || s == nil {
		return nil, err
	}
	var out []*record
	var seq uint64 = 1
	for {
		var m *jetstream.RawStreamMsg
		err := b.retry(ctx, func(ctx context.Context) (err error) {
			m, err = s.GetMsg(ctx, seq, jetstream.WithGetMsgSubject(b.archiveSubject(tid)))
			return err
		})
		if errors.Is(err, jetstream.ErrMsgNotFound) {
			return out, nil
		}
		if err != nil {
			return nil, inbox.Storage(err, "read archived thread %s", tid)
		}
		var r record
		if err := json.Unmarshal(m.Data, &r); err != nil {
			return nil, inbox.Corrupt(err, "archived thread %s: a record is not JSON", tid)
		}
		out = append(out, &r)
		seq = m.Sequence + 1
	}
}

// Archive moves finished threads (of statuses, default all three) last
// changed before now - olderThan out of the live stream.
func (b *Bus) Archive(ctx context.Context, olderThan time.Duration, statuses []string) (*inbox.ArchiveResult, error) {
	statuses, err := inbox.PrepareArchive(olderThan, statuses)
	if err != nil {
		return nil, err
	}
	cutoff := b.now().Add(-olderThan)
	res := &inbox.ArchiveResult{Cutoff: inbox.FormatTime(cutoff), Threads: []string{}, Segments: []string{}}
	var due []string
	err = b.threads(ctx, func(r *record) bool {
		updated, err := inbox.ParseTime(r.Thread.UpdatedAt)
		if err == nil && slices.Contains(statuses, r.Thread.Status) && updated.Before(cutoff) {
			due = append(due, r.Thread.ThreadID)
		}
		return true
	})
	if err != nil {
		return nil, err
	}
	slices.Sort(due)
	if len(due) == 0 {
		return res, nil
	}
	arch, err := b.archive(ctx, true)
	if err != nil {
		return nil, err
	}
	for _, tid := range due {
		recs, err := b.threadRecords(ctx, tid)
		if err != nil {
			return nil, err
		}
		err = b.retry(ctx, func(ctx context.Context) error {
			// A copy cut short by a crash is made again from scratch.
			if err := arch.Purge(ctx, jetstream.WithPurgeSubject(b.archiveSubject(tid))); err != nil {
				return err
			}
			for _, r := range recs {
				data, err := json.Marshal(r) // with its event ids, which archive sequences are not
				if err != nil {
					return err
				}
				if _, err := b.js.Publish(ctx, b.archiveSubject(tid), data); err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil {
			return nil, inbox.Storage(err, "archive thread %s", tid)
		}
		err = b.retry(ctx, func(ctx context.Context) error {
			return b.stream.Purge(ctx, jetstream.WithPurgeSubject(b.prefix+"t."+tid+".>"))
		})
		if err != nil {
			return nil, inbox.Storage(err, "archive thread %s", tid)
		}
		// Its mail has left every mailbox with it: the marks of what was
		// collected (or read) go too, or fsck would find them stale.
		for _, r := range recs {
			if r.Message == nil || r.Prompt {
				continue
			}
			for _, to := range inbox.RecipientsOf(r.Message) {
				b.kv.Delete(ctx, collectedKey(to, r.Message.EventID)) // a leftover only costs fsck --repair a line
			}
		}
		res.Threads = append(res.Threads, tid)
	}
	return res, nil
}

// archivedCount is how many threads the archive holds.
func (b *Bus) archivedCount(ctx context.Context) int {
	s, err := b.archive(ctx, false)
	if err != nil || s == nil {
		return 0
	}
	var n int
	b.retry(ctx, func(ctx context.Context) error {
		info, err := s.Info(ctx, jetstream.WithSubjectFilter(b.archiveSubject("*")))
		if err == nil {
			n = len(info.State.Subjects)
		}
		return err
	})
	return n
}
