package daemon

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/inbox-dev/inbox"
	"github.com/inbox-dev/inbox/intake"
)

// sweep processes every pending descriptor, in name order.
func (d *daemon) sweep(ctx context.Context) {
	names, ok := d.list()
	if !ok {
		return
	}
	// Batches overlap by one stage: while a batch's .result files are
	// being fsynced, the next batch is committed to the store. Each batch
	// is finished before the sweep returns.
	var finish func()
	for len(names) > 0 {
		if ctx.Err() != nil {
			break // stop between batches, never in the middle of one
		}
		n := min(len(names), batchSize)
		// The batch in hand is finished even when ctx ends meanwhile
		// (Run's promise): its operations do not see the stop.
		next := d.processBatch(context.WithoutCancel(ctx), names[:n])
		if finish != nil {
			finish()
		}
		finish = next
		names = names[n:]
	}
	if finish != nil {
		finish()
	}
}

// swapRetries bounds how many times in a row list looks again at an
// intake directory swapped while it armed its watch or listed it.
const swapRetries = 10

// list arms the watch on the directory at the intake's path (arm) and
// lists the pending descriptors there. A directory moved away, deleted or
// replaced in the middle is no failure: arming or listing it fails with
// fs.ErrNotExist (a directory removed while it is read says so too), and
// list starts again on the directory there now, so that a writer who
// swaps the intake directory meets no error in the daemon's log.
func (d *daemon) list() ([]string, bool) {
	for try := 1; ; try++ {
		step, err := d.arm()
		if err == nil {
			at(hookList)
			var names []string
			if names, err = d.pending(); err == nil {
				return names, true
			}
			step = "list"
		}
		if try == swapRetries || !errors.Is(err, fs.ErrNotExist) {
			d.log.Error("cannot "+step+" intake directory", "dir", d.cfg.Intake, "error", err)
			return nil, false
		}
	}
}

// pending lists NAME.task.json files, sorted.
func (d *daemon) pending() ([]string, error) {
	f, err := os.Open(d.cfg.Intake)
	if err != nil {
		return nil, err
	}
	all, err := f.Readdirnames(-1)
	f.Close()
	if err != nil {
		return nil, err
	}
	var names []string
	now := time.Now()
	for _, n := range all {
		if strings.HasSuffix(n, intake.Suffix) && len(n) > len(intake.Suffix) && n[0] != '.' {
			if b := d.retry[n]; b != nil && now.Before(b.at) {
				d.resweepAt(b.at)
				continue
			}
			names = append(names, n)
		}
	}
	slices.Sort(names)
	return names, nil
}

// backoff is when a failing descriptor is tried again.
type backoff struct {
	at   time.Time
	wait time.Duration
}

// failed puts names off: 100 ms after the first failure, doubling to at
// most 30 s.
func (d *daemon) failed(names ...string) {
	for _, n := range names {
		b := d.retry[n]
		if b == nil {
			b = &backoff{wait: 100 * time.Millisecond}
			d.retry[n] = b
		} else {
			b.wait = min(2*b.wait, 30*time.Second)
		}
		b.at = time.Now().Add(b.wait)
		d.resweepAt(b.at)
	}
}

// resweepAt makes the daemon sweep again by t.
func (d *daemon) resweepAt(t time.Time) {
	if d.resweep.IsZero() || t.Before(d.resweep) {
		d.resweep = t
	}
}

// batchSize bounds how many descriptors are dispatched as one commit.
const batchSize = 32

// job is a descriptor read and validated, ready to dispatch.
type job struct {
	name string
	desc *intake.Descriptor
	hash string
	in   inbox.SendInput
}

// processBatch handles descriptors (in name order): refusals at once, then
// the thread-creating ones as one commit, then the ones adding to existing
// threads. It starts writing their .result files and renames (one
// directory fsync) in the background and returns the function that waits
// for that and logs the batch.
func (d *daemon) processBatch(ctx context.Context, names []string) (finish func()) {
	nothing := func() {}
	var create, add []*job
	for _, name := range names {
		if j := d.prepare(name); j != nil {
			if j.in.ThreadID == "" {
				create = append(create, j)
			} else {
				add = append(add, j)
			}
		}
	}
	var ok []dispatched
	if len(create) > 0 {
		ins := make([]inbox.SendInput, len(create))
		for i, j := range create {
			ins[i] = j.in
		}
		results, errs, err := d.s.SendBatch(ctx, ins)
		if err != nil {
			d.log.Error("cannot dispatch descriptors; will retry", "files", len(create), "error", err)
			for _, j := range create {
				d.failed(j.name)
			}
			return nothing
		}
		for i, j := range create {
			if errs[i] != nil {
				d.refuse(j.name, fieldError(errs[i]))
				continue
			}
			ok = append(ok, dispatched{j, results[i]})
		}
	}
	for _, j := range add {
		res, err := d.s.Send(ctx, j.in)
		switch {
		case err == nil:
			ok = append(ok, dispatched{j, res})
		case errors.Is(err, inbox.ErrStorage) || errors.Is(err, inbox.ErrFormat):
			d.log.Error("cannot dispatch descriptor; will retry", "file", j.name, "error", err)
			d.failed(j.name)
		default:
			d.refuse(j.name, fieldError(err))
		}
	}
	if len(ok) == 0 {
		return nothing
	}
	names, results := make([]string, len(ok)), make([]*Result, len(ok))
	for i, o := range ok {
		names[i] = o.j.name
		results[i] = &Result{OK: true, DispatchedAt: inbox.FormatTime(time.Now()),
			Descriptor: &DescriptorInfo{Kind: o.j.desc.Kind, Name: displayName(o.j.name), SHA256: o.j.hash},
			ThreadID:   o.res.Thread.ThreadID, MessageID: o.res.Message.MessageID}
	}
	// finishAll touches only these descriptors' files, so it may run while
	// the next batch is committed; the daemon's own state is updated by
	// finish, on the sweep's goroutine.
	finished := make(chan error, 1)
	go func() { finished <- d.finishAll(names, SuffixProcessed, results) }()
	return func() {
		if err := <-finished; err != nil {
			d.log.Error("cannot finish descriptors; will retry", "files", len(names), "error", err)
			d.failed(names...)
			return
		}
		for _, n := range names {
			delete(d.retry, n)
		}
		d.logBatch(ctx, ok)
	}
}

// dispatched is a descriptor whose thread is committed.
type dispatched struct {
	j   *job
	res *inbox.Result
}

// logBatch logs and tracks a finished batch.
func (d *daemon) logBatch(ctx context.Context, ok []dispatched) {
	for _, o := range ok {
		d.log.Info("descriptor dispatched", "file", o.j.name, "kind", o.j.desc.Kind, "thread", o.res.Thread.ThreadID,
			"message", o.res.Message.MessageID, "replayed", o.res.Replayed)
		d.track(o.res.Thread.ThreadID, FileBase(o.j.name))
		if inbox.IsTerminal(o.res.Thread.Status) {
			d.outcome(ctx, o.res.Thread.ThreadID)
		}
	}
}
