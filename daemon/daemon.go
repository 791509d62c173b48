// Package daemon is `inbox daemon`: the long-running service that turns
// descriptor files dropped into an intake directory into threads (SPEC §6),
// writes their .result and .outcome files, and expires leases.
//
// One goroutine owns all state. It wakes on fsnotify events for the intake
// directory, its parent (so that an intake directory moved away, deleted
// or replaced is noticed at once and watched anew) and the event log, on a
// slow sweep timer (the safety net when notifications are lost) and on the
// next lease expiry.
//
// # Guarantees
//
//   - Exactly once: a descriptor is dispatched with an idempotency key made
//     of its name, the SHA-256 of its content and the identity of the file
//     (device, inode, change time), and only after the thread is committed
//     does it get its .result and become .processed. A crash at any point
//     leaves it pending, and the retry finds the thread the first attempt
//     made instead of making a second one; a new drop under the same name
//     is a new file, hence a new key. The thread records the descriptor's
//     name and hash.
//   - Every descriptor ends as NAME.task.json.processed or .failed, each
//     with a .result; .outcome follows when the thread reaches a terminal
//     status, also for threads that finished while the daemon was down.
//   - A burst is processed in full, in name order; files present at start
//     are processed at start.
//   - A descriptor is answered under its own name (NAME.task.json.result,
//     .processed, .failed, .outcome) whenever NAME.task.json.processed is
//     a legal file name (at most 255 bytes): the daemon's temp files have
//     short names of their own. Only a longer name is answered under the
//     SHA-256 of the name (FileBase).
//
// # Caveats
//
// A descriptor that is not valid JSON and was modified less than two
// seconds ago is left for a later sweep (it may still be being written);
// writers should write a temp file and rename it into place.
package daemon

import (
	"container/heap"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/google/renameio/v2"

	"github.com/inbox-dev/inbox"
	"github.com/inbox-dev/inbox/intake"
	"github.com/inbox-dev/inbox/internal/durable"
	"github.com/inbox-dev/inbox/watcher"
)

// Config is what the daemon serves.
type Config struct {
	Store    inbox.Bus
	Intake   string // the intake directory
	IntakeTo string // the agent new prompt and spawn_worker threads go to
	TrustAll bool   // accept spawn_worker descriptors
	Log      *slog.Logger
	// Sweep is the safety-net interval (default 2 s).
	Sweep time.Duration
	// ForcePoll polls instead of using file notifications.
	ForcePoll bool
}

// Lifecycle file suffixes, appended to NAME.task.json.
const (
	SuffixProcessed = ".processed"
	SuffixFailed    = ".failed"
	SuffixResult    = ".result"
	SuffixOutcome   = ".outcome"
)

// maxKeptName is the longest descriptor name the daemon's files can be
// named after: the longest of them is NAME + ".processed", within the 255
// bytes a file name may have. The daemon's temp files have short names of
// their own (tempPrefix), whatever NAME is.
const maxKeptName = 255 - len(SuffixProcessed)

// tempPrefix starts the name of every temp file the daemon writes in the
// intake directory (the .result and .outcome files before they are
// renamed into place): tempPrefix and random digits, so that the temp
// file's name never limits the descriptor's.
const tempPrefix = ".inbox-daemon.tmp"

// FileBase returns the name under which the daemon writes a descriptor's
// .result and .outcome and renames the descriptor when it is done: name
// itself when NAME.processed is a legal file name (at most 255 bytes), or,
// for a longer name, the SHA-256 of the name in hex followed by
// ".task.json" (docs/FORMAT.md).
func FileBase(name string) string {
	if len(name) <= maxKeptName {
		return name
	}
	sum := sha256.Sum256([]byte(name))
	return hex.EncodeToString(sum[:]) + intake.Suffix
}

// Result is the content of NAME.task.json.result.
type Result struct {
	OK           bool            `json:"ok"`
	DispatchedAt string          `json:"dispatchedAt,omitempty"`
	Descriptor   *DescriptorInfo `json:"descriptor,omitempty"`
	ThreadID     string          `json:"thread_id,omitempty"`
	MessageID    string          `json:"message_id,omitempty"`
	Error        string          `json:"error,omitempty"`
	FailedAt     string          `json:"failedAt,omitempty"`
}

// DescriptorInfo says which descriptor a result is about.
type DescriptorInfo struct {
	Kind   string `json:"kind"`
	Name   string `json:"name"`
	SHA256 string `json:"sha256"`
}

// Outcome is the content of NAME.task.json.outcome: the thread's final
// status and its last message.
type Outcome struct {
	OK         bool           `json:"ok"`
	Status     string         `json:"status"`
	ThreadID   string         `json:"thread_id"`
	Summary    string         `json:"summary"`
	Result     *inbox.Message `json:"result"`
	FinishedAt string         `json:"finishedAt"`
}

// youngAge is how long a descriptor that does not parse is given to finish
// being written before it is refused.
const youngAge = 2 * time.Second

type daemon struct {
	cfg     Config
	s       inbox.Bus
	log     *slog.Logger
	tracked map[string][]string // thread id → descriptors awaiting its .outcome
	byName  map[string]string   // descriptor → the thread it awaits
	leases  expiryHeap
	resweep time.Time // when deferred (young or failing) descriptors should be retried
	// retry holds descriptors whose dispatch or finishing failed (a full
	// disk, say): they wait, with a back-off, instead of being retried
	// at every file event their own attempts cause.
	retry map[string]*backoff
	iw    *watcher.Watcher
	iwDir os.FileInfo // the intake directory iw watches
	// pw watches the intake's parent directory, so that the intake moved
	// away, deleted or replaced by another directory is noticed at once:
	// a watch on the intake itself follows the directory, not its path.
	// Nil when the intake watch polls (polling looks at the path).
	pw *watcher.Watcher
}

// Run serves until ctx is cancelled, finishing the descriptor in hand.
func Run(ctx context.Context, cfg Config) error {
	if cfg.Sweep <= 0 {
		cfg.Sweep = 2 * time.Second
	}
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	if err := inbox.ValidateAgent("intake-to", cfg.IntakeTo); err != nil {
		return err
	}
	d := &daemon{cfg: cfg, s: cfg.Store, log: cfg.Log, tracked: map[string][]string{}, byName: map[string]string{},
		retry: map[string]*backoff{}}
	if err := d.ensureIntake(); err != nil {
		return err
	}
	d.watchParent()
	if err := d.watchIntake(); err != nil {
		return err
	}
	defer func() {
		if d.iw != nil {
			d.iw.Close()
		}
		if d.pw != nil {
			d.pw.Close()
		}
	}()
	// Follow the events from now on before looking at the past, so that
	// nothing that happens in between is missed.
	start, err := d.s.LastEventID()
	if err != nil {
		return err
	}
	events := make(chan *inbox.Event, 256)
	followCtx, stopFollowing := context.WithCancel(ctx)
	following := make(chan struct{})
	go d.follow(followCtx, start, events, following)
	defer func() { stopFollowing(); <-following }()
	d.cleanTemps()
	if err := d.seedLeases(); err != nil {
		return err
	}
	if err := d.catchUpOutcomes(); err != nil {
		return err
	}
	d.log.Info("daemon started", "intake", cfg.Intake, "intake_to", cfg.IntakeTo, "trust_all", cfg.TrustAll,
		"held_leases", d.leases.Len(), "awaiting_outcome", len(d.tracked))
	d.sweep(ctx)
	d.expire()

	sweep := time.NewTicker(cfg.Sweep)
	defer sweep.Stop()
	lease := time.NewTimer(time.Hour)
	defer lease.Stop()
	for {
		lease.Reset(d.untilNext())
		select {
		case <-ctx.Done():
			d.log.Info("daemon stopping")
			return nil
		case <-d.intakeC():
			d.sweep(ctx)
		case <-d.parentC():
			if d.replaced() {
				d.sweep(ctx) // re-arms on the directory there now
			}
		case ev := <-events:
			d.event(ev)
		case <-sweep.C:
			d.sweep(ctx)
			d.checkpoint()
		case <-lease.C:
			d.expire()
			if !d.resweep.IsZero() && !time.Now().Before(d.resweep) {
				d.resweep = time.Time{}
				d.sweep(ctx)
			}
		}
	}
}

// watchIntake (re)arms the watch on the intake directory, remembering
// which directory it is: one moved away and replaced must be watched anew.
// The directory is identified before the watch is armed: if it is
// replaced in between, the watch may be on the new one while the daemon
// remembers the old, which only costs one more re-arm when the parent's
// watch reports the swap; the other order could remember the new
// directory while watching the old, and never notice.
func (d *daemon) watchIntake() error {
	if d.iw != nil {
		d.iw.Close()
		d.iw = nil
	}
	var err error
	if d.iwDir, err = os.Stat(d.cfg.Intake); err != nil {
		return err
	}
	if armHook != nil {
		armHook()
	}
	d.iw, err = d.watch(d.cfg.Intake)
	return err
}

// watchParent arms the watch on the intake's parent directory, unless
// the daemon polls (a poll of the intake looks at whatever directory is
// at its path, so it notices a swap by itself) or notifications are not
// to be had for the parent: then the sweep is the safety net.
func (d *daemon) watchParent() {
	if d.cfg.ForcePoll {
		return
	}
	w, err := watcher.New(filepath.Dir(d.cfg.Intake), watcher.Options{})
	if err != nil {
		return
	}
	if w.Fallback() != nil {
		w.Close()
		return
	}
	d.pw = w
}

// intakeC is the intake watch's channel; nil (never ready) while there
// is none (arming it failed: the next sweep tries again).
func (d *daemon) intakeC() <-chan struct{} {
	if d.iw == nil {
		return nil
	}
	return d.iw.C
}

// parentC is the parent watch's channel; nil (never ready) without one.
func (d *daemon) parentC() <-chan struct{} {
	if d.pw == nil {
		return nil
	}
	return d.pw.C
}

// replaced reports whether the intake directory at its path is not the
// one the daemon watches: moved away, deleted or replaced.
func (d *daemon) replaced() bool {
	fi, err := os.Stat(d.cfg.Intake)
	return err != nil || d.iw == nil || !os.SameFile(fi, d.iwDir)
}

// armHook, when a test sets it, runs between identifying the intake
// directory and arming its watch, where a swap is hardest to notice.
var armHook func()

func (d *daemon) watch(dir string) (*watcher.Watcher, error) {
	w, err := watcher.New(dir, watcher.Options{ForcePoll: d.cfg.ForcePoll})
	if err != nil {
		return nil, err
	}
	if r := w.Fallback(); r != nil {
		d.log.Warn("file notifications unavailable; polling every 100ms", "dir", dir, "reason", r)
	}
	return w, nil
}

// ensureIntake creates the intake directory (0700) if it is missing.
func (d *daemon) ensureIntake() error {
	fi, err := os.Stat(d.cfg.Intake)
	if err == nil {
		if !fi.IsDir() {
			return fmt.Errorf("intake %s is not a directory", d.cfg.Intake)
		}
		return nil
	}
	if !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	if err := os.MkdirAll(d.cfg.Intake, 0o700); err != nil {
		return fmt.Errorf("create intake directory: %w", err)
	}
	if err := os.Chmod(d.cfg.Intake, 0o700); err != nil {
		return err
	}
	return durable.SyncDir(filepath.Dir(d.cfg.Intake))
}

// cleanTemps removes the temp files of .result and .outcome writes that a
// killed daemon left in the intake directory. Only one daemon runs, so at
// start every such file is stale. Droppers' own temp files are left alone.
func (d *daemon) cleanTemps() {
	entries, err := os.ReadDir(d.cfg.Intake)
	if err != nil {
		return
	}
	for _, e := range entries {
		n := e.Name()
		if !strings.HasPrefix(n, ".") {
			continue
		}
		if rest, ok := strings.CutPrefix(n, tempPrefix); ok && rest != "" && strings.Trim(rest, "0123456789") == "" {
			os.Remove(filepath.Join(d.cfg.Intake, n))
			continue
		}
		// The names earlier versions gave their temp files:
		// "." + NAME + ".result" or ".outcome" + random digits.
		for _, suf := range []string{intake.Suffix + SuffixResult, intake.Suffix + SuffixOutcome} {
			i := strings.LastIndex(n, suf)
			if i > 0 && i+len(suf) < len(n) && strings.Trim(n[i+len(suf):], "0123456789") == "" {
				os.Remove(filepath.Join(d.cfg.Intake, n))
			}
		}
	}
}

// sweep processes every pending descriptor, in name order.
func (d *daemon) sweep(ctx context.Context) {
	if fi, err := os.Stat(d.cfg.Intake); err != nil || d.iw == nil || !os.SameFile(fi, d.iwDir) {
		// Deleted, or moved away and replaced: recreate it if needed and
		// watch the directory that is there now.
		if errors.Is(err, fs.ErrNotExist) {
			if err := d.ensureIntake(); err != nil {
				d.log.Error("cannot recreate intake directory", "dir", d.cfg.Intake, "error", err)
				return
			}
			d.log.Warn("intake directory was missing; recreated", "dir", d.cfg.Intake)
		} else if err == nil && d.iw != nil {
			d.log.Warn("intake directory was replaced; watching the new one", "dir", d.cfg.Intake)
		}
		if err := d.watchIntake(); err != nil {
			d.log.Error("cannot watch intake directory", "dir", d.cfg.Intake, "error", err)
			return
		}
	}
	names, err := d.pending()
	if err != nil {
		d.log.Error("cannot list intake directory", "error", err)
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
		next := d.processBatch(names[:n])
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
func (d *daemon) processBatch(names []string) (finish func()) {
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
		results, errs, err := d.s.SendBatch(ins)
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
		res, err := d.s.Send(j.in)
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
		d.logBatch(ok)
	}
}

// dispatched is a descriptor whose thread is committed.
type dispatched struct {
	j   *job
	res *inbox.Result
}

// logBatch logs and tracks a finished batch.
func (d *daemon) logBatch(ok []dispatched) {
	for _, o := range ok {
		d.log.Info("descriptor dispatched", "file", o.j.name, "kind", o.j.desc.Kind, "thread", o.res.Thread.ThreadID,
			"message", o.res.Message.MessageID, "replayed", o.res.Replayed)
		d.track(o.res.Thread.ThreadID, FileBase(o.j.name))
		if inbox.IsTerminal(o.res.Thread.Status) {
			d.outcome(o.res.Thread.ThreadID)
		}
	}
}

// prepare reads and validates one descriptor. It refuses bad ones on the
// spot and returns nil for them, for ones gone meanwhile and for ones that
// may still be being written.
func (d *daemon) prepare(name string) *job {
	p := filepath.Join(d.cfg.Intake, name)
	fi, err := os.Lstat(p)
	if err != nil {
		return nil // gone meanwhile
	}
	switch {
	case fi.Mode()&fs.ModeSymlink != 0:
		d.refuse(name, "symlinks are refused: drop the descriptor itself, not a link to it")
		return nil
	case !fi.Mode().IsRegular():
		d.refuse(name, fmt.Sprintf("not a regular file (%s)", fi.Mode().Type()))
		return nil
	case fi.Size() > intake.MaxSize:
		d.refuse(name, fmt.Sprintf("descriptor is %d bytes; the limit is %d", fi.Size(), intake.MaxSize))
		return nil
	}
	data, ident, err := readDescriptor(p)
	if err != nil {
		d.log.Error("cannot read descriptor", "file", name, "error", err)
		return nil
	}
	desc, err := intake.Parse(data)
	if errors.Is(err, intake.ErrSyntax) && time.Since(fi.ModTime()) < youngAge {
		// Possibly still being written: give it a moment.
		d.resweepAt(fi.ModTime().Add(youngAge))
		return nil
	}
	if err != nil {
		d.refuse(name, err.Error())
		return nil
	}
	if desc.Kind == intake.KindSpawnWorker && !d.cfg.TrustAll {
		d.refuse(name, "spawn_worker descriptors are refused unless the daemon runs with --trust-all (or INBOX_TRUST_ALL=1)")
		return nil
	}
	sum := sha256.Sum256(data)
	hash := hex.EncodeToString(sum[:])
	in, err := d.toSend(desc)
	if err != nil {
		d.refuse(name, err.Error())
		return nil
	}
	// The key of this drop: its name, content and file identity. A retry
	// after a crash sees the same key; a new drop under the name does not.
	in.IdempotencyKey = dropKey(name, hash, ident)
	if in.ThreadID == "" {
		in.Origin = &inbox.Origin{Descriptor: displayName(name), SHA256: hash}
	}
	// A new drop under an old name must not be taken for finished.
	os.Remove(filepath.Join(d.cfg.Intake, FileBase(name)+SuffixOutcome))
	return &job{name: name, desc: desc, hash: hash, in: in}
}

// dropKey is the idempotency key of one drop: the descriptor's name, its
// content's SHA-256 and the file's identity. A name that would make the
// key too long, or is not UTF-8, is replaced by its SHA-256.
func dropKey(name, hash, ident string) string {
	key := "intake:" + name + ":" + hash + ":" + ident
	if len(key) <= inbox.MaxIdemKeyLen && utf8.ValidString(name) {
		return key
	}
	sum := sha256.Sum256([]byte(name))
	return "intake:sha256-" + hex.EncodeToString(sum[:]) + ":" + hash + ":" + ident
}

// displayName is a descriptor's name as JSON can carry it: bytes that are
// not UTF-8 become U+FFFD.
func displayName(name string) string { return strings.ToValidUTF8(name, "\uFFFD") }

// descriptorField maps the store's field names to descriptor fields,
// where they differ.
var descriptorField = map[string]string{"kind": "message_kind", "payload_json": "payload", "run": "run_id",
	"task": "task_id", "artifact": "artifacts", "artifact_kind": "artifacts", "artifact_metadata_json": "artifacts"}

// descriptorName names a store field as the writer of a descriptor knows it.
func descriptorName(field string) string {
	if f, ok := descriptorField[field]; ok {
		return f
	}
	return field
}

// fieldError phrases a store refusal in the descriptor's terms: the field
// as the writer of the descriptor knows it, not a CLI flag.
func fieldError(err error) string {
	var se *inbox.Error
	if !errors.As(err, &se) {
		return err.Error()
	}
	if se.Field == "" {
		return se.Render(descriptorName)
	}
	rule := &inbox.Error{Rule: se.Rule}
	return fmt.Sprintf("field %q: %s", descriptorName(se.Field), rule.Render(descriptorName))
}

// refuse finishes a descriptor as failed.
func (d *daemon) refuse(name, reason string) {
	result := &Result{OK: false, Error: reason, FailedAt: inbox.FormatTime(time.Now())}
	if err := d.finish(name, SuffixFailed, result); err != nil {
		d.log.Error("cannot finish descriptor; will retry", "file", name, "error", err)
		d.failed(name)
		return
	}
	delete(d.retry, name)
	d.log.Warn("descriptor refused", "file", name, "error", reason)
}

// finish writes NAME.result and renames the descriptor to NAME+suffix.
func (d *daemon) finish(name, suffix string, result *Result) error {
	return d.finishAll([]string{name}, suffix, []*Result{result})
}

// finishAll writes each NAME.result (fsynced, renamed into place) and only
// then renames each descriptor to NAME+suffix; one fsync of the intake
// directory makes all the renames durable. A crash between the two leaves
// a descriptor pending: the retry writes the same result again.
func (d *daemon) finishAll(names []string, suffix string, results []*Result) error {
	var pending []*renameio.PendingFile
	defer func() {
		for _, pf := range pending {
			pf.Cleanup()
		}
	}()
	for i := range names {
		data, err := json.MarshalIndent(results[i], "", "  ")
		if err != nil {
			return err
		}
		pf, err := tempFile(d.cfg.Intake)
		if err != nil {
			return err
		}
		pending = append(pending, pf)
		if _, err := pf.Write(append(data, '\n')); err != nil {
			return err
		}
	}
	// The fsyncs of a batch's results overlap.
	if err := durable.SyncFiles(pending); err != nil {
		return err
	}
	for i, pf := range pending {
		if err := pf.Close(); err != nil {
			return err
		}
		if err := os.Rename(pf.Name(), filepath.Join(d.cfg.Intake, FileBase(names[i])+SuffixResult)); err != nil {
			return err
		}
	}
	other := SuffixFailed
	if suffix == SuffixFailed {
		other = SuffixProcessed
	}
	for _, name := range names {
		p, done := filepath.Join(d.cfg.Intake, name), filepath.Join(d.cfg.Intake, FileBase(name))
		os.Remove(done + other) // from an earlier drop under the same name
		if err := os.Rename(p, done+suffix); err != nil {
			return err
		}
	}
	return durable.SyncDir(d.cfg.Intake) // makes every rename durable
}

// writeFile publishes a JSON file (0600) atomically and durably.
func (d *daemon) writeFile(path string, v any) error {
	if err := d.place(path, v); err != nil {
		return err
	}
	return durable.SyncDir(filepath.Dir(path))
}

// place writes a JSON file (0600) to a temp file, fsyncs it and renames it
// into place; the caller fsyncs the directory.
func (d *daemon) place(path string, v any) error {
	data, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	pf, err := tempFile(filepath.Dir(path))
	if err != nil {
		return err
	}
	defer pf.Cleanup()
	if _, err := pf.Write(append(data, '\n')); err != nil {
		return err
	}
	if err := pf.Sync(); err != nil {
		return err
	}
	if err := pf.Close(); err != nil {
		return err
	}
	return os.Rename(pf.Name(), path)
}

// tempFile opens a new temp file (0600) in dir, named tempPrefix and
// random digits whatever file it will become: the caller writes, fsyncs
// and closes it, then renames it into place.
func tempFile(dir string) (*renameio.PendingFile, error) {
	return renameio.NewPendingFile(filepath.Join(dir, tempPrefix[1:]), renameio.WithTempDir(dir), renameio.WithStaticPermissions(0o600))
}

// toSend turns a descriptor into a send.
func (d *daemon) toSend(desc *intake.Descriptor) (inbox.SendInput, error) {
	from := desc.From
	if from == "" {
		from = "intake"
	}
	switch desc.Kind {
	case intake.KindPrompt:
		to := desc.To
		if to == "" {
			to = d.cfg.IntakeTo
		}
		subject := desc.Subject
		if subject == "" {
			subject = inbox.Shorten(inbox.FirstLine(desc.Prompt), 80)
			if subject == "" {
				subject = "prompt"
			}
		}
		return inbox.SendInput{From: from, To: to, Subject: subject, Kind: inbox.KindTask, Priority: desc.Priority,
			TaskID: desc.TaskID, Content: inbox.Content{Body: desc.Prompt}}, nil
	case intake.KindSend:
		in := inbox.SendInput{From: from, To: desc.To, Subject: desc.Subject, ThreadID: desc.Thread, RunID: desc.RunID,
			TaskID: desc.TaskID, Kind: desc.MessageKind, Priority: desc.Priority,
			Content: inbox.Content{Summary: desc.Summary, Body: desc.Body, PayloadJSON: string(desc.Payload)}}
		for _, a := range desc.Artifacts {
			in.Artifacts = append(in.Artifacts, inbox.ArtifactInput{Path: a.Path, Kind: a.Kind, MetadataJSON: string(a.Metadata)})
		}
		return in, nil
	case intake.KindSpawnWorker:
		payload, err := json.Marshal(map[string]any{"spawn_worker": map[string]any{
			"agent_type": desc.AgentType, "name": desc.Name, "prompt": desc.Prompt, "task_id": desc.TaskID,
			"skill": desc.Skill, "role": desc.Role, "skills": desc.Skills, "model": desc.Model, "cwd": desc.Cwd}})
		if err != nil {
			return inbox.SendInput{}, err
		}
		return inbox.SendInput{From: from, To: d.cfg.IntakeTo, Subject: "spawn_worker " + desc.AgentType + ": " + desc.Name,
			Kind: inbox.KindTask, TaskID: desc.TaskID,
			Content: inbox.Content{Summary: "spawn " + desc.AgentType + " worker " + desc.Name, Body: desc.Prompt,
				PayloadJSON: string(payload)}}, nil
	}
	return inbox.SendInput{}, fmt.Errorf("unknown descriptor kind %q", desc.Kind)
}

// catchUpOutcomes finds processed descriptors without an .outcome: those
// whose thread is already terminal get one now, the rest are tracked.
func (d *daemon) catchUpOutcomes() error {
	entries, err := os.ReadDir(d.cfg.Intake)
	if err != nil {
		return err
	}
	for _, e := range entries {
		n := e.Name()
		if !strings.HasSuffix(n, intake.Suffix+SuffixProcessed) {
			continue
		}
		name := strings.TrimSuffix(n, SuffixProcessed)
		p := filepath.Join(d.cfg.Intake, name)
		if _, err := os.Stat(p + SuffixOutcome); err == nil {
			continue
		}
		data, err := os.ReadFile(p + SuffixResult)
		if err != nil {
			continue
		}
		var r struct {
			ThreadID string `json:"thread_id"`
		}
		if json.Unmarshal(data, &r) != nil || r.ThreadID == "" {
			continue
		}
		d.track(r.ThreadID, name)
		th, err := d.s.Thread(r.ThreadID)
		if err == nil && inbox.IsTerminal(th.Status) {
			d.outcome(r.ThreadID)
		}
	}
	return nil
}

// checkpoint lets a backend that materialises files lazily make them
// durable (spool's watermark; see docs/ARCHITECTURE.md), so that a crash
// of the machine leaves little to replay.
func (d *daemon) checkpoint() {
	if c, ok := d.s.(interface{ Checkpoint() error }); ok {
		if err := c.Checkpoint(); err != nil {
			d.log.Warn("cannot checkpoint the store", "error", err)
		}
	}
}

// follow sends the events after id start to events until ctx ends, on a
// goroutine of its own (the daemon's state stays with Run's loop). A
// failure to read is logged and retried a second later from the last
// event sent.
func (d *daemon) follow(ctx context.Context, start int64, events chan<- *inbox.Event, done chan<- struct{}) {
	defer close(done)
	after := start
	for {
		err := d.s.Follow(ctx, after, "", inbox.WaitOptions{ForcePoll: d.cfg.ForcePoll}, func(ev *inbox.Event) bool {
			select {
			case events <- ev:
				after = ev.EventID
				return true
			case <-ctx.Done():
				return false
			}
		})
		if ctx.Err() != nil {
			return
		}
		d.log.Error("cannot follow the event log; retrying", "error", err)
		select {
		case <-ctx.Done():
			return
		case <-time.After(time.Second):
		}
	}
}

// event handles one new event: a terminal thread gets its .outcome,
// claims and renewals feed the lease-expiry schedule.
func (d *daemon) event(ev *inbox.Event) {
	switch ev.EventType {
	case inbox.EventThreadDone, inbox.EventThreadFailed, inbox.EventThreadCancelled:
		if _, ok := d.tracked[ev.ThreadID]; ok {
			d.outcome(ev.ThreadID)
		}
	case inbox.EventThreadClaimed, inbox.EventLeaseRenewed:
		var p struct {
			ExpiresAt string `json:"expires_at"`
		}
		if json.Unmarshal(ev.PayloadJSON, &p) == nil {
			if t, err := time.Parse(time.RFC3339Nano, p.ExpiresAt); err == nil {
				heap.Push(&d.leases, expiry{tid: ev.ThreadID, at: t})
			}
		}
	}
}

// track records that descriptor name awaits thread tid's outcome. A name
// dropped again serves only its newest thread: an older thread that
// finishes later must not overwrite the newer drop's .outcome.
func (d *daemon) track(tid, name string) {
	if old, ok := d.byName[name]; ok && old != tid {
		d.tracked[old] = slices.DeleteFunc(d.tracked[old], func(n string) bool { return n == name })
		if len(d.tracked[old]) == 0 {
			delete(d.tracked, old)
		}
	}
	d.byName[name] = tid
	if !slices.Contains(d.tracked[tid], name) {
		d.tracked[tid] = append(d.tracked[tid], name)
	}
}

// outcome writes NAME.outcome for every descriptor of a terminal thread.
func (d *daemon) outcome(tid string) {
	names, ok := d.tracked[tid]
	if !ok {
		return
	}
	th, m, err := d.s.LastMessage(tid)
	if err != nil {
		d.log.Error("cannot read thread for outcome", "thread", tid, "error", err)
		return
	}
	if !inbox.IsTerminal(th.Status) {
		return
	}
	out := &Outcome{OK: th.Status == inbox.StatusDone, Status: th.Status, ThreadID: tid, Result: m,
		FinishedAt: th.UpdatedAt}
	if m != nil {
		out.Summary = m.Summary
	}
	for _, name := range names {
		if err := d.writeFile(filepath.Join(d.cfg.Intake, name+SuffixOutcome), out); err != nil {
			d.log.Error("cannot write outcome", "file", name, "error", err)
			return // tracked still: retried on the next event or start
		}
		delete(d.byName, name)
		d.log.Info("outcome written", "file", name, "thread", tid, "status", th.Status)
	}
	delete(d.tracked, tid)
}

// seedLeases schedules every held lease's expiry.
func (d *daemon) seedLeases() error {
	held, err := d.s.HeldLeases()
	if err != nil {
		return err
	}
	for _, l := range held {
		heap.Push(&d.leases, expiry{tid: l.ThreadID, at: l.ExpiresAt})
	}
	return nil
}

// expire releases every lease that is due.
func (d *daemon) expire() {
	now := time.Now()
	for d.leases.Len() > 0 && !d.leases[0].at.After(now) {
		e := heap.Pop(&d.leases).(expiry)
		ok, err := d.s.ExpireLease(e.tid)
		switch {
		case err != nil && !errors.Is(err, inbox.ErrNotFound):
			d.log.Error("cannot expire lease", "thread", e.tid, "error", err)
		case ok:
			d.log.Info("lease expired", "thread", e.tid)
		}
	}
}

// untilNext is how long until the next due lease or deferred sweep.
func (d *daemon) untilNext() time.Duration {
	next := time.Hour
	if d.leases.Len() > 0 {
		next = min(next, time.Until(d.leases[0].at)+time.Millisecond)
	}
	if !d.resweep.IsZero() {
		next = min(next, time.Until(d.resweep)+time.Millisecond)
	}
	return max(next, time.Millisecond)
}

type expiry struct {
	tid string
	at  time.Time
}

type expiryHeap []expiry

func (h expiryHeap) Len() int           { return len(h) }
func (h expiryHeap) Less(i, j int) bool { return h[i].at.Before(h[j].at) }
func (h expiryHeap) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *expiryHeap) Push(x any)        { *h = append(*h, x.(expiry)) }
func (h *expiryHeap) Pop() any {
	old := *h
	x := old[len(old)-1]
	*h = old[:len(old)-1]
	return x
}
