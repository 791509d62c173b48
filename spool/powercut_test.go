package spool

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/inbox-dev/inbox"
	"github.com/inbox-dev/inbox/daemon"
	"github.com/inbox-dev/inbox/internal/crashfs"
	"github.com/inbox-dev/inbox/internal/testproc"
)

var powerCuts = flag.Int("powercut.cuts", powerCutsDefault(), "power cuts TestPowerCut makes (12; 100 with -tags long; a full run: 500)")

// powerCutsDefault is how many cuts TestPowerCut makes when not told: a
// dozen rounds of every kind of writer in the default run, a soak in the
// long one.
func powerCutsDefault() int {
	if testproc.Long {
		return 100
	}
	return 12
}

// TestPowerCut: writers change the store on a file system that forgets
// everything no fsync or fdatasync covered (internal/crashfs), and the
// power is cut at a random instant while they write. After each cut the
// machine "restarts" (the watermark's boot id is another), the store is
// opened, and every operation that was acknowledged before the cut must be
// there, exactly once, with fsck clean. The store lives on through all the
// cuts, so later rounds start from what earlier recoveries left.
//
// Checkpoints are off: crashfs does not see syncfs, so on it a
// checkpoint would claim durable what is not (see crashfs's doc); with
// them off, recovery replays the log from the last watermark written
// outside the cut (the previous recovery's).
func TestPowerCut(t *testing.T) {
	lost := runPowerCuts(t, *powerCuts, Options{CheckpointEvery: -1})
	if lost > 0 {
		t.Errorf("%d acknowledged operations were lost", lost)
	}
}

// TestPowerCutCatchesAMissingFlush shows that TestPowerCut can fail:
// without the event log's fdatasync, acknowledged operations are lost to
// the first cuts.
func TestPowerCutCatchesAMissingFlush(t *testing.T) {
	skipLogFlush = true
	defer func() { skipLogFlush = false }()
	if lost := runPowerCuts(t, 4, Options{CheckpointEvery: -1}); lost == 0 {
		t.Errorf("without the log's fdatasync nothing was lost to 4 power cuts: the test cannot see a missing flush")
	}
}

// ledger records what the writers were told succeeded.
type ledger struct {
	mu      sync.Mutex
	threads map[string]string        // thread id → subject of an acknowledged new thread
	msgs    map[string]string        // message id → its thread
	tokens  map[string]int64         // thread id → highest acknowledged claim token
	done    map[string]bool          // thread id → acknowledged done
	reads   map[string]*inbox.Cursor // thread NUL agent → acknowledged cursor
	mail    map[string]bool          // message ids collected (must never come back)
	// dispatched is how many descriptors the daemon had answered, as of
	// the last check.
	dispatched int
	// acked is signalled (without blocking) whenever an operation is
	// acknowledged, so that a round's cut can wait for one.
	acked chan struct{}
}

func newLedger() *ledger {
	return &ledger{threads: map[string]string{}, msgs: map[string]string{}, tokens: map[string]int64{},
		done: map[string]bool{}, reads: map[string]*inbox.Cursor{}, mail: map[string]bool{}, acked: make(chan struct{}, 1)}
}

// ack signals that a writer was told an operation succeeded.
func (l *ledger) ack() {
	select {
	case l.acked <- struct{}{}:
	default:
	}
}

func (l *ledger) result(r *inbox.Result) {
	defer l.ack()
	l.mu.Lock()
	defer l.mu.Unlock()
	if r.Thread != nil && r.Message != nil && r.Message.Seq == 1 {
		l.threads[r.Thread.ThreadID] = r.Thread.Subject
	}
	if r.Message != nil {
		l.msgs[r.Message.MessageID] = r.Message.ThreadID
	}
	if r.Lease != nil && !r.Lease.Released() && r.Lease.LeaseToken > l.tokens[r.Thread.ThreadID] {
		l.tokens[r.Thread.ThreadID] = r.Lease.LeaseToken
	}
	if r.Thread != nil && r.Thread.Status == inbox.StatusDone {
		l.done[r.Thread.ThreadID] = true
	}
}

func (l *ledger) threadIDs() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []string
	for tid := range l.threads {
		out = append(out, tid)
	}
	return out
}

// runPowerCuts runs cuts rounds of writers and power cuts with the
// writers' options, checks each recovery, and returns how many
// acknowledged operations it found missing.
func runPowerCuts(t *testing.T, cuts int, writerOpts Options) (lost int) {
	// One mark-read in four dies between its two writes (the event and
	// the cursor line), as a timed-out wait-reply killed there would: it
	// is not acknowledged, and the next mark-read of the same message
	// must still be durable.
	markReadDies = func() bool { return rand.IntN(4) == 0 }
	defer func() { markReadDies = nil }()
	base := t.TempDir()
	backing, mnt := filepath.Join(base, "backing"), filepath.Join(base, "mnt")
	for _, d := range []string{backing, mnt} {
		if err := os.Mkdir(d, 0o700); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := Init(filepath.Join(backing, "store"), false); err != nil {
		t.Fatal(err)
	}
	l := newLedger()
	r := rand.New(rand.NewPCG(uint64(cuts), 7))
	for round := range cuts {
		fsys, err := crashfs.Mount(backing, mnt, crashfs.Options{})
		if err != nil {
			t.Fatal(err)
		}
		db := filepath.Join(mnt, "store")
		ctx, stop := context.WithCancel(context.Background())
		var wg sync.WaitGroup
		for w := range 3 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				write(ctx, db, writerOpts, l, rand.New(rand.NewPCG(uint64(round), uint64(w))))
			}()
		}
		// Readers marking the same threads read as the writers change
		// them.
		for rd := range 2 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				markReads(ctx, db, writerOpts, l, rand.New(rand.NewPCG(uint64(round), uint64(100+rd))))
			}()
		}
		// The daemon, and a process dropping descriptors for it.
		wg.Add(2)
		go func() {
			defer wg.Done()
			if s, err := Open(ctx, db, writerOpts); err == nil {
				daemon.Run(ctx, daemon.Config{Store: s, Intake: filepath.Join(db, intakeDir), IntakeTo: "coordinator",
					Sweep: 50 * time.Millisecond})
			}
		}()
		go func() {
			defer wg.Done()
			drop(ctx, filepath.Join(db, intakeDir), round)
		}()
		select { // a signal from an earlier round is stale
		case <-l.acked:
		default:
		}
		time.Sleep(time.Duration(5+r.IntN(120)) * time.Millisecond)
		// A round that acknowledged nothing yet (a loaded machine: the
		// writers still opening the store) tests nothing: the cut waits
		// for the first acknowledgment.
		select {
		case <-l.acked:
		case <-time.After(30 * time.Second):
		}
		// The cut, while the writers write: what they do from here on
		// fails, and what no flush covered is gone.
		if err := fsys.Cut(); err != nil {
			stop()
			wg.Wait()
			t.Fatalf("round %d: cut: %v", round, err)
		}
		stop()
		wg.Wait()
		// The machine restarts.
		store := filepath.Join(backing, "store")
		w, _ := (&Store{dir: store}).readWatermark()
		crashMachine(t, store, w.EventID)
		n := checkRecovery(t, store, l, round)
		lost += n
		if (round+1)%100 == 0 {
			t.Logf("%d cuts so far, %d acknowledged operations lost", round+1, lost)
		}
		if n > 0 && skipLogFlush {
			return lost // the negative control has what it came for
		}
	}
	t.Logf("%d cuts; %d threads, %d messages and %d descriptors acknowledged", cuts, len(l.threads), len(l.msgs), l.dispatched)
	return lost
}

// write runs one writer until ctx ends or the file system fails it:
// sends (some in batches, as the daemon sends), replies, claims, updates,
// dones, mail, collections and mark-reads, recording what succeeded.
func write(ctx context.Context, db string, opts Options, l *ledger, r *rand.Rand) {
	s, err := Open(ctx, db, opts)
	if err != nil {
		return
	}
	for i := 0; ctx.Err() == nil; i++ {
		key := fmt.Sprintf("k%d-%d", r.Int64(), i)
		var res *inbox.Result
		switch tids := l.threadIDs(); {
		case len(tids) == 0 || r.IntN(5) == 0:
			res, err = s.Send(ctx, inbox.SendInput{From: "boss", To: "w", Subject: "t " + key, Content: inbox.Content{Body: "body " + key, IdempotencyKey: key}})
		case r.IntN(8) == 0:
			var ins []inbox.SendInput
			for j := range 3 {
				ins = append(ins, inbox.SendInput{From: "intake", To: "w", Subject: fmt.Sprint("b ", key, j),
					Content: inbox.Content{IdempotencyKey: fmt.Sprint(key, j)}})
			}
			results, errs, berr := s.SendBatch(ctx, ins)
			if berr != nil {
				return
			}
			for j, br := range results {
				if errs[j] == nil {
					l.result(br)
				}
			}
			continue
		case r.IntN(6) == 0:
			res, err = s.Send(ctx, inbox.SendInput{From: "boss", To: "m", Content: inbox.Content{Body: "mail " + key}})
		case r.IntN(6) == 0:
			msgs, cerr := s.Collect(ctx, "m", "", false, 1)
			if cerr != nil {
				return
			}
			l.mu.Lock()
			for _, m := range msgs {
				l.mail[m.MessageID] = true
			}
			l.mu.Unlock()
			continue
		default:
			tid := tids[r.IntN(len(tids))]
			switch r.IntN(5) {
			case 0:
				res, err = s.Reply(ctx, "boss", "", tid, inbox.KindAnswer, inbox.Content{Summary: "a " + key, IdempotencyKey: key})
			case 1:
				res, err = s.Claim(ctx, "w", tid, 600)
			case 2:
				res, err = s.Update(ctx, "w", tid, inbox.StatusInProgress, 0, inbox.Content{Summary: "p " + key, IdempotencyKey: key})
			case 3:
				res, err = s.Done(ctx, "w", tid, 0, inbox.Content{Summary: "d " + key, IdempotencyKey: key})
			case 4:
				err = markRead(ctx, s, l, "w", tid)
			}
		}
		switch {
		case err == nil && res != nil:
			l.result(res)
		case errors.Is(err, inbox.ErrStorage), errors.Is(err, inbox.ErrFormat):
			return // the power is gone
		}
	}
}

// markRead marks tid read by agent and records the acknowledged cursor.
func markRead(ctx context.Context, s *Store, l *ledger, agent, tid string) error {
	c, err := s.MarkRead(ctx, agent, tid, 0)
	if errors.Is(err, errMarkReadDied) {
		return nil // not acknowledged; the writer lives on
	}
	if err == nil {
		l.mu.Lock()
		key := tid + "\x00" + agent
		if old := l.reads[key]; old == nil || c.LastReadSeq > old.LastReadSeq {
			l.reads[key] = c
		}
		l.mu.Unlock()
		l.ack()
	}
	return err
}

// markReads marks random acknowledged threads read, as agent "w" (the
// writers' worker, so that reader and writer race on the same cursors)
// or "r", until ctx ends or the file system fails it.
func markReads(ctx context.Context, db string, opts Options, l *ledger, r *rand.Rand) {
	s, err := Open(ctx, db, opts)
	if err != nil {
		return
	}
	for ctx.Err() == nil {
		tids := l.threadIDs()
		if len(tids) == 0 {
			time.Sleep(time.Millisecond)
			continue
		}
		agent := "w"
		if r.IntN(2) == 0 {
			agent = "r"
		}
		err := markRead(ctx, s, l, agent, tids[r.IntN(len(tids))])
		if errors.Is(err, inbox.ErrStorage) || errors.Is(err, inbox.ErrFormat) {
			return
		}
	}
}

// drop drops descriptors into the intake directory (write, then rename
// in) until ctx ends.
func drop(ctx context.Context, intake string, round int) {
	for i := 0; ctx.Err() == nil; i++ {
		name := fmt.Sprintf("r%03d-%04d.task.json", round, i)
		tmp := filepath.Join(intake, "."+name)
		data := fmt.Sprintf(`{"version":1,"kind":"prompt","prompt":"drop %d of round %d"}`, i, round)
		if os.WriteFile(tmp, []byte(data), 0o600) != nil || os.Rename(tmp, filepath.Join(intake, name)) != nil {
			return
		}
		time.Sleep(2 * time.Millisecond)
	}
}

// checkIntake checks exactly-once intake after a cut: every descriptor
// whose .result says it was dispatched names a thread that is there, and
// no descriptor has two threads.
func checkIntake(t *testing.T, s *Store, db string, miss func(string, ...any)) (dispatched int) {
	t.Helper()
	entries, _ := os.ReadDir(filepath.Join(db, intakeDir))
	for _, e := range entries {
		name, ok := strings.CutSuffix(e.Name(), daemon.SuffixResult)
		if !ok {
			continue
		}
		data, err := os.ReadFile(filepath.Join(db, intakeDir, e.Name()))
		if err != nil {
			continue
		}
		var r daemon.Result
		if json.Unmarshal(data, &r) != nil {
			miss("descriptor %s has a torn .result", name)
			continue
		}
		if r.OK {
			dispatched++
			if v, err := s.Show(t.Context(), r.ThreadID); err != nil || v.Origin == nil || v.Origin.Descriptor != name {
				miss("dispatched descriptor %s: its thread %s is missing (%v)", name, r.ThreadID, err)
			}
		}
	}
	seen := map[string]string{}
	ths, _ := s.List(t.Context(), inbox.ListFilter{CreatedBy: "intake", Limit: inbox.MaxLimit})
	for _, th := range ths {
		v, err := s.Show(t.Context(), th.ThreadID)
		if err != nil || v.Origin == nil {
			continue
		}
		if other, dup := seen[v.Origin.Descriptor]; dup {
			miss("descriptor %s has two threads: %s and %s", v.Origin.Descriptor, other, th.ThreadID)
		}
		seen[v.Origin.Descriptor] = th.ThreadID
	}
	return dispatched
}

// checkRecovery opens the store after a cut and checks every acknowledged
// operation; it returns how many are missing.
func checkRecovery(t *testing.T, db string, l *ledger, round int) (lost int) {
	t.Helper()
	s, err := Open(t.Context(), db, Options{})
	if err != nil {
		t.Fatalf("round %d: open after the cut: %v", round, err)
	}
	miss := func(format string, args ...any) {
		lost++
		if lost <= 10 {
			t.Logf("round %d: "+format, append([]any{round}, args...)...)
		}
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	byThread := map[string]*inbox.ThreadView{}
	view := func(tid string) *inbox.ThreadView {
		if v, ok := byThread[tid]; ok {
			return v
		}
		v, err := s.Show(t.Context(), tid)
		if err != nil {
			v = nil
		}
		byThread[tid] = v
		return v
	}
	for tid, subject := range l.threads {
		if v := view(tid); v == nil || v.Thread.Subject != subject {
			miss("acknowledged thread %s (%q) is missing", tid, subject)
		}
	}
	for mid, tid := range l.msgs {
		v := view(tid)
		n := 0
		if v != nil {
			for _, m := range v.Messages {
				if m.MessageID == mid {
					n++
				}
			}
		}
		if n != 1 {
			miss("acknowledged message %s of %s is there %d times", mid, tid, n)
		}
	}
	for tid, token := range l.tokens {
		if v := view(tid); v == nil || v.Lease == nil || v.Lease.LeaseToken < token {
			miss("acknowledged claim of %s (token %d) is lost", tid, token)
		}
	}
	for tid := range l.done {
		if v := view(tid); v == nil || v.Thread.Status != inbox.StatusDone {
			miss("acknowledged done of %s is lost", tid)
		}
	}
	for _, c := range l.reads {
		if got, _ := s.readCursor(c.ThreadID, c.AgentID); got == nil || got.LastReadSeq < c.LastReadSeq {
			miss("acknowledged mark-read of %s by %s at %d is lost", c.ThreadID, c.AgentID, c.LastReadSeq)
		}
	}
	items, _ := s.Mailbox(t.Context(), "m", "")
	for _, it := range items {
		if l.mail[it.Message.MessageID] {
			miss("collected message %s came back to the mailbox", it.Message.MessageID)
		}
	}
	var last int64
	if err := s.Events(t.Context(), 0, func(ev *inbox.Event) bool {
		if ev.EventID <= last {
			miss("event %d after %d", ev.EventID, last)
		}
		last = ev.EventID
		return true
	}); err != nil {
		t.Fatalf("round %d: events: %v", round, err)
	}
	l.dispatched = checkIntake(t, s, db, miss)
	// (The negative control loses flushed-over writes on purpose: what
	// fsck then finds, a marker of a message that never committed, is
	// that loss, not a fault of recovery.)
	if r, err := s.Fsck(t.Context(), false); err != nil || (!r.Clean() && !skipLogFlush) {
		t.Errorf("round %d: fsck after recovery: %v %+v", round, err, r)
	}
	return lost
}
