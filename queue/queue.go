// Package queue runs queued tasks (SPEC §7). A runner — a detached process
// that `inbox run` starts — takes the tasks it was given, at most N at a
// time, and runs each as `sh -c CMD` in its own process group with the
// task's prompt on stdin. When a task's process exits 0 its stdout becomes
// the result message from the task to its parent's mailbox; otherwise, or
// past its timeout (the whole process group is killed: SIGTERM, then
// SIGKILL after a short grace), the message carries
// {"success":false,"error":…,"partial_output":…}.
//
// # Guarantees
//
// Every task the runner starts ends with a message to its parent, whatever
// the size of its output: the output is captured in the file the bus
// names (TaskOutputPath) and becomes the message's body when it is text of
// at most inbox.MaxInline bytes, else a blob the message points at.
//
// A task starts exactly once (SPEC §7): Start claims its thread, leased
// to the task's name, only if the thread was never claimed
// (inbox.Bus.StartTask, a compare-and-set on the backend), so of any
// number of runs racing for a task one starts it and the others pass it
// over. A task that started is never started again, also not once its
// runner died and its lease lapsed (the daemon makes its thread pending
// again; the task still shows running). The run command starts the tasks
// that start now itself, before it returns, so that queue shows them
// running, and hands them to the runner (Config.Started); the runner
// starts the rest as its slots free. A runner killed mid-task (kill -9)
// leaves a record of its process (SetTaskRunner); Reap, which queue,
// run, receive and check call, fails such a task visibly — killing
// whatever is left of its process group — with the output it captured,
// so nothing is silently running forever and nothing runs twice: a task
// is executed at most once, and its parent always hears.
// Cancel kills a running task's process group and delivers the failure.
// A task's message goes when its process exits, or at its timeout,
// whatever the processes it started outside its process group (setsid)
// do: they may keep its output open, never its message back.
//
// A task's output is bounded like any content (SPEC §8 "Input without end
// is bounded"): the runner reads it through a pipe and writes at most the
// store's maximum (its MaxBlob, inbox init --max-blob; else
// inbox.DefaultMaxBlob) to the capture file, and asks the store for room
// as it grows (inbox.SizeChecker). Past either bound the task is stopped
// as a timeout stops it and fails at once, its partial output the last
// 64 KiB it printed; the capture file never holds more than the maximum
// and is removed whatever happens.
//
// # Caveats
//
// The room asked for while capturing is the room to store the output
// so far once more (what inline output costs: its message and its log
// line), so a store whose file system is nearly full stops a large output
// sooner than a body staged as a blob would be refused.
package queue

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
	"unicode/utf8"

	"github.com/inbox-dev/inbox"
	"github.com/inbox-dev/inbox/internal/safefile"
)

// Config is what one runner runs.
type Config struct {
	Store inbox.Bus
	// DB is the store's location, given to tasks as INBOX_DB without the
	// secret a NATS store's URL may hold (inbox.SplitNATSURL).
	DB          string
	Exec        string   // the command, run as sh -c Exec
	Concurrency int      // at most this many at once; 0 means all
	Tasks       []string // task names, started in this order
	// Started are the tasks of Tasks that were started already (Start),
	// by the run command that started this runner, by name: the runner
	// runs them as they are, if they are still that start's.
	Started map[string]Started
	Log     *slog.Logger
	// Grace is how long a timed-out task's process group has between
	// SIGTERM and SIGKILL (default 2 s).
	Grace time.Duration
	// DefaultTimeout applies to tasks pushed without a timeout (0: none).
	DefaultTimeout time.Duration
	// Umask is the umask tasks start with, in octal ("0022"): the user's,
	// as the command that started the runner found it (StartUmask), not
	// the runner's own, which a group-shared store sets to 007. Empty:
	// the umask this process started with.
	Umask string
	// Secret is the NATS store's password or token when it is not in DB
	// (inbox.NATSSecret). Tasks never get it in their environment (SPEC
	// §8): the runner writes it to a file only its user can read, in
	// SecretDir (the temp directory when empty), names that file in
	// inbox.EnvNATSPasswordFile and removes it when it returns.
	Secret    string
	SecretDir string

	env []string // what a task's environment starts from (Run sets it)
}

// drainDelay bounds how long a task's standard error (and the copy of its
// prompt to its stdin) is waited for once its process has exited: a
// process it started outside its process group may hold them open.
const drainDelay = time.Second

// maxStderr bounds the standard error kept from a task: its last lines
// explain a failure.
const maxStderr = 64 << 10

// maxPartial bounds the partial output of a task stopped for the size of
// its output: its last 64 KiB (less under a smaller store maximum).
const maxPartial = 64 << 10

// roomStep is how much output a task may print between two questions to
// the store about its room (a statfs each).
const roomStep = 1 << 20

// captureBuffer is the size of the reads from a task's standard output.
const captureBuffer = 128 << 10

// Run runs the configured tasks and returns when all have finished (or
// ctx is cancelled, in which case running tasks are killed and reported
// failed).
func Run(ctx context.Context, cfg Config) error {
	if cfg.Grace <= 0 {
		cfg.Grace = 2 * time.Second
	}
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.NewTextHandler(os.Stderr, nil))
	}
	if cfg.Umask == "" {
		cfg.Umask = StartUmask()
	}
	if cfg.Umask != "" {
		// It becomes part of a shell command: digits only.
		v, err := strconv.ParseUint(cfg.Umask, 8, 32)
		if err != nil || v > 0o777 {
			return fmt.Errorf("umask %q is not an octal umask (0000 to 0777)", cfg.Umask)
		}
		cfg.Umask = fmt.Sprintf("%04o", v)
	}
	var cred inbox.NATSCredentials
	cfg.DB, cred = inbox.SplitNATSURL(cfg.DB, cfg.Secret)
	cfg.Secret = cred.Secret()
	env := inbox.WithoutEnv(os.Environ(), "INBOX_DB", inbox.EnvNATSPassword, inbox.EnvNATSPasswordFile)
	if cfg.Secret != "" {
		p, err := writeSecret(cfg.SecretDir, cfg.Secret)
		if err != nil {
			// The tasks run all the same; only their own use of the
			// store will be refused.
			cfg.Log.Error("cannot hand the store's secret to tasks", "error", err)
		} else {
			defer os.Remove(p)
			env = append(env, inbox.EnvNATSPasswordFile+"="+p)
		}
	}
	cfg.env = env
	n := cfg.Concurrency
	if n <= 0 {
		n = len(cfg.Tasks)
	}
	sem := make(chan struct{}, max(n, 1))
	var wg sync.WaitGroup
	for _, name := range cfg.Tasks {
		select {
		case sem <- struct{}{}:
		case <-ctx.Done():
			wg.Wait()
			return ctx.Err()
		}
		wg.Add(1)
		go func() {
			defer func() { <-sem; wg.Done() }()
			if err := runOne(ctx, cfg, name); err != nil {
				cfg.Log.Error("task not run", "task", name, "error", err)
			}
		}()
	}
	wg.Wait()
	return nil
}

// leaseFor is how long a task's lease lasts: its timeout and a margin, or
// an hour (renewed) when it has no timeout.
func leaseFor(timeout time.Duration) int {
	if timeout > 0 {
		return int(timeout.Seconds()) + 60
	}
	return 3600
}

// Started is the start of a task's run (Start): its thread and lease
// token.
type Started struct {
	ThreadID string
	Token    int64
}

// taskTimeout is how long task t may run: its own timeout, else def.
func taskTimeout(t *inbox.Task, def time.Duration) time.Duration {
	if t.TimeoutSeconds > 0 {
		return time.Duration(t.TimeoutSeconds) * time.Second
	}
	return def
}

// Start starts queued task t's run (SPEC §7 "Exactly one start"): it
// claims the task's thread as the task's name for the task's lease
// (its timeout, else defaultTimeout, and a margin) if it was never
// claimed (inbox.Bus.StartTask). Of any number of runs racing for the
// task exactly one starts it (ok); for the others, and for a task that
// started before or finished, ok is false and err nil. The caller then
// runs it with the lease's token.
func Start(ctx context.Context, s inbox.Bus, t *inbox.Task, defaultTimeout time.Duration) (st Started, ok bool, err error) {
	res, err := s.StartTask(ctx, t, leaseFor(taskTimeout(t, defaultTimeout)))
	if errors.Is(err, inbox.ErrInvalidState) || errors.Is(err, inbox.ErrLeaseConflict) {
		return Started{}, false, nil // another run started it, or it finished
	}
	if err != nil {
		return Started{}, false, err
	}
	return Started{ThreadID: t.ThreadID, Token: res.Lease.LeaseToken}, true, nil
}

// Abandon fails task t, started (Start, its lease token) but never run,
// saying why: its parent hears.
func Abandon(ctx context.Context, s inbox.Bus, t *inbox.Task, token int64, why string) error {
	return deliver(ctx, s, t, token, outcome{why: why})
}

// own reads task name as this runner is to run it: one Start started for
// it (given), else the name's queued task, which it starts. It returns
// nil when the task is not this runner's to run: another run started it,
// or it finished (cancelled) meanwhile.
func own(ctx context.Context, cfg Config, name string) (*inbox.Task, int64, error) {
	t, err := cfg.Store.TaskByName(ctx, name)
	if err != nil {
		return nil, 0, err
	}
	if st, given := cfg.Started[name]; given {
		if t.ThreadID != st.ThreadID || t.State() != "running" || t.LeaseToken != st.Token {
			cfg.Log.Info("task no longer this run's: not run", "task", name, "thread", st.ThreadID, "state", t.State())
			return nil, 0, nil
		}
		return t, st.Token, nil
	}
	if t.State() != "queued" {
		return nil, 0, nil // started or finished by someone else meanwhile
	}
	st, ok, err := Start(ctx, cfg.Store, t, cfg.DefaultTimeout)
	if !ok || err != nil {
		return nil, 0, err
	}
	return t, st.Token, nil
}

func runOne(ctx context.Context, cfg Config, name string) error {
	s := cfg.Store
	t, token, err := own(ctx, cfg, name)
	if t == nil || err != nil {
		return err
	}
	timeout := taskTimeout(t, cfg.DefaultTimeout)
	lease := leaseFor(timeout)
	outPath, err := s.TaskOutputPath(ctx, name)
	if err != nil {
		return deliverRetrying(ctx, cfg, t, token, outcome{why: "cannot capture the task's output: " + err.Error()})
	}
	out, err := safefile.OpenFile(outPath, os.O_CREATE|os.O_TRUNC|os.O_WRONLY, 0o600)
	if err != nil {
		return deliverRetrying(ctx, cfg, t, token, outcome{why: "cannot capture the task's output: " + err.Error()})
	}
	defer os.Remove(outPath)
	defer out.Close()
	limit := outputLimit(s)
	cmd := taskCommand(cfg.Exec, cfg.Umask)
	if t.PromptBlob != "" {
		pf, err := s.OpenBlob(ctx, t.PromptBlob)
		if err != nil {
			return deliverRetrying(ctx, cfg, t, token, outcome{why: "cannot read the task's prompt: " + err.Error()})
		}
		defer pf.Close()
		cmd.Stdin = pf
	} else {
		cmd.Stdin = strings.NewReader(t.Prompt)
	}
	// Standard output and standard error come through pipes of our own
	// rather than ones exec copies from: Wait then returns when the
	// task's process exits, even while a process it started in another
	// session (setsid) holds them open. WaitDelay bounds exec's copy of
	// the prompt to stdin the same way. Standard output is copied to the
	// capture file up to the store's limit (capture).
	var stderr tail
	stderr.max = int(min(maxStderr, limit))
	errR, errW, err := os.Pipe()
	if err != nil {
		return deliverRetrying(ctx, cfg, t, token, outcome{why: "cannot capture the task's standard error: " + err.Error()})
	}
	defer errR.Close()
	outR, outW, err := os.Pipe()
	if err != nil {
		errW.Close()
		return deliverRetrying(ctx, cfg, t, token, outcome{why: "cannot capture the task's output: " + err.Error()})
	}
	defer outR.Close()
	cmd.Stdout, cmd.Stderr = outW, errW
	cmd.WaitDelay = drainDelay
	cmd.Env = append(slices.Clip(cfg.env),
		"INBOX_TASK_NAME="+name, "INBOX_AGENT="+name, "INBOX_THREAD="+t.ThreadID,
		"INBOX_PARENT="+t.Parent, "INBOX_MODEL="+t.Model, "INBOX_DB="+cfg.DB)
	cmd.SysProcAttr = procAttr()
	started := time.Now()
	err = cmd.Start()
	errW.Close() // the task holds them now
	outW.Close()
	if err != nil {
		return deliverRetrying(ctx, cfg, t, token, outcome{why: "cannot start the task: " + err.Error()})
	}
	drained := make(chan struct{})
	go func() {
		io.Copy(&stderr, errR)
		close(drained)
	}()
	capt := &capture{f: out, s: s, limit: limit, next: roomStep}
	copied := make(chan error, 1)
	go func() {
		_, err := io.CopyBuffer(capt, outR, make([]byte, captureBuffer))
		copied <- err
	}()
	pgid := cmd.Process.Pid
	rec := &inbox.TaskRunner{RunnerPID: os.Getpid(), RunnerStart: procStart(os.Getpid()), PGID: pgid, StartedAt: inbox.FormatTime(started)}
	if err := s.SetTaskRunner(ctx, name, rec); err != nil {
		cfg.Log.Warn("cannot record the task's runner", "task", name, "error", err)
	}
	defer s.SetTaskRunner(ctx, name, nil)
	cfg.Log.Info("task started", "task", name, "thread", t.ThreadID, "pgid", pgid)

	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	var expired <-chan time.Time
	if timeout > 0 {
		timer := time.NewTimer(timeout)
		defer timer.Stop()
		expired = timer.C
	}
	renew := time.NewTicker(time.Duration(lease/3) * time.Second)
	defer renew.Stop()
	why := ""
	var waitErr, copyErr error
	truncated := false // stopped for its output's size
loop:
	for {
		select {
		case waitErr = <-done:
			break loop
		case copyErr = <-copied:
			copied = nil
			if copyErr == nil {
				continue // it closed its standard output, and may run on
			}
			// Past the store's limit, or out of room: stopped as a
			// timeout stops it, failed at once.
			why, truncated = captureFailure(copyErr, capt.n, limit)
			waitErr = stop(pgid, done, cfg.Grace)
			break loop
		case <-renew.C:
			_, err := s.Renew(ctx, name, t.ThreadID, lease, token)
			if errors.Is(err, inbox.ErrLeaseExpired) {
				// It lapsed (the store was out of reach): the run is still
				// this one's, and takes its lease back.
				token, err = reclaim(ctx, s, t, lease, token)
			}
			if err != nil {
				cfg.Log.Warn("cannot renew the task's lease", "task", name, "error", err)
			}
		case <-expired:
			why = fmt.Sprintf("timed out after %s", timeout)
			waitErr = stop(pgid, done, cfg.Grace)
			break loop
		case <-ctx.Done():
			why = "the runner was stopped"
			waitErr = stop(pgid, done, cfg.Grace)
			break loop
		}
	}
	// Whatever the task started in its group goes with it. What it
	// started elsewhere may hold its standard output and error open for
	// ever: what is in the pipes is read, for drainDelay at most.
	syscall.Kill(-pgid, syscall.SIGKILL)
	errR.SetReadDeadline(time.Now().Add(drainDelay))
	outR.SetReadDeadline(time.Now().Add(drainDelay))
	<-drained
	if copied != nil {
		copyErr = <-copied
		if errors.Is(copyErr, os.ErrDeadlineExceeded) {
			copyErr = nil // held open elsewhere: what came in time is the output
		}
		if copyErr != nil && why == "" {
			// Over the limit in what it printed last.
			why, truncated = captureFailure(copyErr, capt.n, limit)
		}
	}
	if errors.Is(waitErr, exec.ErrWaitDelay) {
		waitErr = nil // exited 0; only the copy of its prompt was cut short
	}
	ok := why == "" && waitErr == nil
	if why == "" && waitErr != nil {
		why = waitErr.Error()
		if e := strings.TrimSpace(stderr.String()); e != "" {
			why += ": " + lastLine(e)
		}
	}
	cfg.Log.Info("task finished", "task", name, "success", ok, "error", why, "seconds", time.Since(started).Seconds(), "output_bytes", capt.n)
	return deliverRetrying(ctx, cfg, t, token, outcome{ok: ok, why: why, outPath: outPath, stderr: stderr.String(), truncated: truncated})
}

// outputLimit is the largest output a task of s may print: the store's
// maximum (SPEC §8), inbox.DefaultMaxBlob for a bus that does not say.
func outputLimit(s inbox.Bus) int64 {
	if m, ok := s.(interface{ MaxBlob() int64 }); ok {
		if n := m.MaxBlob(); n > 0 {
			return n
		}
	}
	return inbox.DefaultMaxBlob
}

// checkSize asks s, when it bounds content (inbox.SizeChecker), whether
// n bytes of field may be stored in a message.
func checkSize(s inbox.Bus, field string, n int64) error {
	if sc, ok := s.(inbox.SizeChecker); ok {
		return sc.CheckSize(field, n)
	}
	return nil
}

// errOverLimit is returned by a capture's Write past its limit.
var errOverLimit = errors.New("output over the limit")

// capture writes a task's standard output to its capture file, bounded
// (SPEC §8): at most limit bytes, the rest refused with errOverLimit;
// and every roomStep bytes it asks the store whether it has room for
// what it holds (checkSize), failing with the store's refusal when not.
type capture struct {
	f     *os.File
	s     inbox.Bus
	limit int64
	n     int64 // bytes written
	next  int64 // the size at which to ask for room again
}

func (c *capture) Write(p []byte) (int, error) {
	if over := c.n + int64(len(p)) - c.limit; over > 0 {
		k, err := c.f.Write(p[:int64(len(p))-over])
		c.n += int64(k)
		if err == nil {
			err = errOverLimit
		}
		return k, err
	}
	if end := c.n + int64(len(p)); end >= c.next {
		if err := checkSize(c.s, "output", end); err != nil {
			return 0, err
		}
		c.next = end + roomStep
	}
	k, err := c.f.Write(p)
	c.n += int64(k)
	return k, err
}

// captureFailure says why the capture of a task's output stopped with
// err after n bytes: truncated when for its size (the partial output is
// then its last bytes).
func captureFailure(err error, n, limit int64) (why string, truncated bool) {
	switch {
	case errors.Is(err, errOverLimit):
		return fmt.Sprintf("output over the store's maximum of %s (max_blob): the task was stopped; partial_output is the last %s of it (inbox init --max-blob SIZE raises the maximum)",
			inbox.FormatSize(limit), inbox.FormatSize(partialLimit(limit))), true
	case errors.Is(err, inbox.ErrInvalidInput):
		return fmt.Sprintf("the task was stopped after %s of output: %v", inbox.FormatSize(n), err), true
	}
	return "cannot capture the task's output: " + err.Error(), false
}

// partialLimit is how much of an output stopped for its size its failure
// keeps: maxPartial, or the store's maximum when smaller.
func partialLimit(limit int64) int64 { return min(maxPartial, limit) }

// writeSecret writes secret to a new file in dir (the temp directory when
// empty) that only its owner can read, and returns its path.
func writeSecret(dir, secret string) (string, error) {
	f, err := os.CreateTemp(dir, "inbox-nats-secret-*")
	if err != nil {
		return "", fmt.Errorf("create a file for the store's secret: %w", err)
	}
	p := f.Name()
	err = f.Chmod(0o600) // CreateTemp's mode, whatever the umask
	if err == nil {
		_, err = f.WriteString(secret + "\n")
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		os.Remove(p)
		return "", fmt.Errorf("write %s: %w", p, err)
	}
	return p, nil
}

// taskCommand is sh -c command, started with umask (octal): when this
// process's umask is another, or cannot be read without changing it, a
// shell sets it first and replaces itself with sh -c command (the same
// process: its group, its pid).
func taskCommand(command, umask string) *exec.Cmd {
	if umask != "" {
		if now, ok := umaskNow(); !ok || fmt.Sprintf("%04o", now) != umask {
			return exec.Command("/bin/sh", "-c", "umask "+umask+" && exec /bin/sh -c \"$1\"", "/bin/sh", command)
		}
	}
	return exec.Command("/bin/sh", "-c", command)
}

// outcome is how a task ended, as its message tells it.
type outcome struct {
	ok      bool
	why     string // why it failed
	outPath string // its captured standard output ("": none)
	stderr  string // the last of its standard error
	// truncated: it was stopped for the size of its output, whose last
	// bytes (partialLimit) are the partial output.
	truncated bool
}

// deliverRetrying delivers a finished task's message, retrying while the
// store refuses for a storage error (a full disk may be freed): a task
// must not stay "running" after its process exited. A message the store
// refuses as invalid (content over its limits) becomes a failure saying
// so, and that failure, when refused too, goes without the output and
// standard error: the parent always hears. It gives up when the runner is
// stopped; then Reap reports the task failed.
func deliverRetrying(ctx context.Context, cfg Config, t *inbox.Task, token int64, o outcome) error {
	wait := 100 * time.Millisecond
	for {
		err := deliver(ctx, cfg.Store, t, token, o)
		switch {
		case err == nil:
			return nil
		case errors.Is(err, inbox.ErrInvalidState):
			// Finished meanwhile: cancelled (which delivered the failure),
			// or reaped.
			cfg.Log.Info("task already finished; its result was not needed", "task", t.Name, "error", err)
			return nil
		case errors.Is(err, inbox.ErrLeaseExpired):
			// The lease lapsed (the daemon may have released it): the
			// task is still this run's, and its message goes.
			if token, err = reclaim(ctx, cfg.Store, t, 60, token); err == nil {
				continue
			}
			if errors.Is(err, inbox.ErrInvalidState) {
				return nil // finished meanwhile
			}
			return err
		case errors.Is(err, inbox.ErrInvalidInput) && o.ok:
			cfg.Log.Warn("the store refused the task's result; it fails instead", "task", t.Name, "error", err)
			o.ok, o.why, o.truncated = false, "the store refused the task's output: "+err.Error(), true
			continue
		case errors.Is(err, inbox.ErrInvalidInput) && (o.outPath != "" || o.stderr != ""):
			cfg.Log.Warn("the store refused the task's failure; it goes without its output", "task", t.Name, "error", err)
			o.why += " (its output and standard error were not kept: " + err.Error() + ")"
			o.outPath, o.stderr = "", ""
			continue
		case !errors.Is(err, inbox.ErrStorage):
			return err
		}
		cfg.Log.Error("cannot deliver the task's result; retrying", "task", t.Name, "error", err, "in", wait)
		select {
		case <-ctx.Done():
			return err
		case <-time.After(wait):
		}
		wait = min(2*wait, 30*time.Second)
	}
}

// reclaim takes back the lapsed lease of task t's run for secs seconds
// and returns its new token. Only the run's own lease (token) is taken
// back: a task never runs twice, so nobody else holds it but a reaper
// about to fail it, whose claim then fails.
func reclaim(ctx context.Context, s inbox.Bus, t *inbox.Task, secs int, token int64) (int64, error) {
	v, err := s.Show(ctx, t.ThreadID)
	if err != nil {
		return token, err
	}
	if v.Lease == nil || v.Lease.LeaseToken != token || v.Lease.AgentID != t.Name {
		return token, inbox.Errorf(inbox.ErrStaleToken, "stale_lease_token", "lease_token",
			"the lease of task %s's run (token %d) was taken since", t.Name, token)
	}
	c, err := s.Claim(ctx, t.Name, t.ThreadID, secs)
	if err != nil {
		return token, err
	}
	return c.Lease.LeaseToken, nil
}

// stop ends a process group: SIGTERM, then SIGKILL after grace.
func stop(pgid int, done <-chan error, grace time.Duration) error {
	syscall.Kill(-pgid, syscall.SIGTERM)
	select {
	case err := <-done:
		return err
	case <-time.After(grace):
		syscall.Kill(-pgid, syscall.SIGKILL)
		return <-done
	}
}

// output is a task's captured standard output as a message carries it:
// inline text when it is UTF-8 without NUL bytes, at most
// inbox.MaxInline bytes and the store takes it inline (checkSize: its
// maximum, its room), else a blob adopted from the capture file (which
// costs no room: the blob is another name for it). A capture larger than
// the store's maximum is refused (inbox.TooLarge), never adopted.
func output(ctx context.Context, s inbox.Bus, outPath, field string) (text string, blob *inbox.Blob, err error) {
	if outPath == "" {
		return "", nil, nil
	}
	fi, err := os.Stat(outPath)
	if errors.Is(err, os.ErrNotExist) {
		return "", nil, nil
	}
	if err != nil {
		return "", nil, fmt.Errorf("read the task's output: %w", err)
	}
	if limit := outputLimit(s); fi.Size() > limit {
		return "", nil, inbox.TooLarge(field, fi.Size(), limit, "this store's maximum (max_blob)", "raise the maximum (inbox init --max-blob SIZE)")
	}
	if fi.Size() <= inbox.MaxInline && checkSize(s, field, fi.Size()) == nil {
		data, err := os.ReadFile(outPath)
		if err != nil {
			return "", nil, fmt.Errorf("read the task's output: %w", err)
		}
		if isText(data) {
			return string(data), nil, nil
		}
	}
	b, err := s.AdoptBlob(ctx, field, outPath)
	return "", b, err
}

// outputTail is the last max bytes of the capture at outPath as a
// message carries them: inline text (without the pieces of a character
// cut at the start) when that is text, else a staged blob.
func outputTail(ctx context.Context, s inbox.Bus, outPath, field string, max int64) (text string, blob *inbox.Blob, err error) {
	if outPath == "" {
		return "", nil, nil
	}
	f, err := safefile.OpenFile(outPath, os.O_RDONLY, 0)
	if errors.Is(err, os.ErrNotExist) {
		return "", nil, nil
	}
	if err != nil {
		return "", nil, fmt.Errorf("read the task's output: %w", err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return "", nil, fmt.Errorf("read the task's output: %w", err)
	}
	off := fi.Size() - min(fi.Size(), max)
	data := make([]byte, fi.Size()-off)
	n, err := f.ReadAt(data, off)
	if err != nil && !errors.Is(err, io.EOF) {
		return "", nil, fmt.Errorf("read the task's output: %w", err)
	}
	data = data[:n]
	cut := data
	for i := 0; i < utf8.UTFMax-1 && off > 0 && len(cut) > 0 && !utf8.RuneStart(cut[0]); i++ {
		cut = cut[1:]
	}
	if isText(cut) {
		return string(cut), nil, nil
	}
	b, err := s.StageBlob(ctx, field, bytes.NewReader(data))
	return "", b, err
}

// isText reports whether data can be a message's text: UTF-8 without NUL
// bytes.
func isText(data []byte) bool { return utf8.Valid(data) && bytes.IndexByte(data, 0) < 0 }

// deliver finishes the task's thread: done with its output as the result,
// or failed with the error and partial output. Either way the parent gets
// a message from the task.
func deliver(ctx context.Context, s inbox.Bus, t *inbox.Task, token int64, o outcome) error {
	if o.ok {
		text, blob, err := output(ctx, s, o.outPath, "body")
		if err != nil {
			return err
		}
		summary := inbox.Shorten(inbox.FirstLine(text), 200)
		if summary == "" {
			summary = "task " + t.Name + " finished"
		}
		c := inbox.Content{Summary: summary, Body: text}
		if blob != nil {
			c.Blobs = []*inbox.Blob{blob}
		}
		_, err = s.Done(ctx, t.Name, t.ThreadID, token, c)
		return err
	}
	c, err := failure(ctx, s, o.why, o.outPath, o.truncated)
	if err != nil {
		return err
	}
	c.Summary, c.Body = "task "+t.Name+" failed: "+inbox.Shorten(o.why, 300), o.stderr
	_, err = s.Fail(ctx, t.Name, t.ThreadID, token, c)
	return err
}

// failure is the content of a failure message: the payload
// {"success":false,"error":…,"partial_output":…}. The partial output is
// the capture at outPath, or its last bytes (partialLimit) when it was
// stopped for its size (truncated) or is over the store's maximum, with
// "partial_output_truncated":true; when it cannot be inline (not text, or
// the payload would be over the store's limits) it is a blob, which
// "partial_output_blob" names.
func failure(ctx context.Context, s inbox.Bus, why, outPath string, truncated bool) (inbox.Content, error) {
	var text string
	var blob *inbox.Blob
	var err error
	if !truncated {
		text, blob, err = output(ctx, s, outPath, "partial_output")
		var ie *inbox.Error
		if errors.As(err, &ie) && ie.Code == "too_large" {
			truncated = true
		} else if err != nil {
			return inbox.Content{}, err
		}
	}
	if truncated {
		if text, blob, err = outputTail(ctx, s, outPath, "partial_output", partialLimit(outputLimit(s))); err != nil {
			return inbox.Content{}, err
		}
	}
	p := map[string]any{"success": false, "error": why, "partial_output": text}
	if truncated {
		p["partial_output_truncated"] = true
	}
	payload, err := json.Marshal(p)
	if err != nil {
		return inbox.Content{}, err
	}
	if text != "" && checkSize(s, "payload_json", int64(len(payload))) != nil {
		// Escaped in JSON the text is over what the store takes inline
		// (a newline is two bytes there): a blob instead, the capture
		// file itself when it is whole.
		p["partial_output"] = ""
		if truncated {
			blob, err = s.StageBlob(ctx, "partial_output", strings.NewReader(text))
		} else {
			blob, err = s.AdoptBlob(ctx, "partial_output", outPath)
		}
		if err != nil {
			return inbox.Content{}, err
		}
	}
	var c inbox.Content
	if blob != nil {
		p["partial_output_blob"] = blob.Ref()
		c.Blobs = []*inbox.Blob{blob}
		if payload, err = json.Marshal(p); err != nil {
			return inbox.Content{}, err
		}
	}
	c.PayloadJSON = string(payload)
	return c, nil
}

// Cancel cancels a task on behalf of agent: a queued one is never started,
// a running one's process group is killed (SIGTERM, then SIGKILL after
// grace). Either way the parent gets the failure message, with the
// output so far as partial_output.
func Cancel(ctx context.Context, s inbox.Bus, t *inbox.Task, agent, reason, key string, grace time.Duration) (*inbox.Result, error) {
	why := "cancelled by " + agent
	if reason != "" {
		why += ": " + reason
	}
	outPath, _ := s.TaskOutputPath(ctx, t.Name)
	c, err := failure(ctx, s, why, outPath, false)
	if err != nil {
		return nil, err
	}
	c.Summary, c.IdempotencyKey = "task "+t.Name+" "+inbox.Shorten(why, 300), key
	// Cancelled first, then killed: the runner, finding the thread
	// finished when its process exits, delivers nothing more.
	res, err := s.CancelTask(ctx, agent, t, c)
	if err != nil {
		return nil, err
	}
	// The runner records its process a moment after starting it: look
	// again now rather than trust what t was read with (the same task:
	// its name may already be another's).
	r := t.Runner
	if now, err := s.TaskByName(ctx, t.Name); err == nil && now.ThreadID == t.ThreadID && now.Runner != nil {
		r = now.Runner
	}
	if r != nil && r.PGID > 0 {
		killGroup(r.PGID, grace)
	}
	return res, nil
}

// killGroup ends a process group that is not our child: SIGTERM, then
// SIGKILL once grace has passed if any member is left.
func killGroup(pgid int, grace time.Duration) {
	if syscall.Kill(-pgid, syscall.SIGTERM) != nil {
		return // gone already
	}
	deadline := time.Now().Add(grace)
	for time.Now().Before(deadline) {
		if syscall.Kill(-pgid, 0) != nil {
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
	syscall.Kill(-pgid, syscall.SIGKILL)
}

// unrecordedGrace is how long a claimed task may go without a record of
// its runner: a live runner writes it milliseconds after claiming.
const unrecordedGrace = 30 * time.Second

// Reap fails running tasks whose runner is gone: the runner process no
// longer exists (or is another process with the same pid), or there is
// no record of a runner long after the task was claimed (the runner died
// between claiming it and starting it), or the task's lease has expired.
// Whatever is left of the task's process group is killed. It returns the
// names it failed.
func Reap(ctx context.Context, s inbox.Bus, tasks []*inbox.Task) ([]string, error) {
	var reaped []string
	for _, t := range tasks {
		if t.State() != "running" {
			continue
		}
		rec := t.Runner
		alive := false
		switch {
		case rec != nil:
			alive = procStart(rec.RunnerPID) == rec.RunnerStart && rec.RunnerStart != 0
		default:
			rec = &inbox.TaskRunner{}
			// No record: the runner died between claiming and starting
			// (or is a moment from writing it); the claim's age tells,
			// and the lease: one that lapsed (released or not) was not
			// renewed, by a runner that is not there.
			started, perr := time.Parse(time.RFC3339Nano, t.StartedAt)
			alive = !leaseLapsed(ctx, s, t) && (perr != nil || time.Since(started) < unrecordedGrace)
		}
		if alive {
			continue
		}
		if rec.PGID > 0 {
			syscall.Kill(-rec.PGID, syscall.SIGKILL)
		}
		why := fmt.Sprintf("the runner (pid %d) died before the task finished", rec.RunnerPID)
		if rec.RunnerPID == 0 {
			why = "the runner died before the task started"
		}
		outPath, _ := s.TaskOutputPath(ctx, t.Name)
		o := outcome{why: why, outPath: outPath}
		if err := deliver(ctx, s, t, t.LeaseToken, o); err != nil {
			if errors.Is(err, inbox.ErrInvalidState) || errors.Is(err, inbox.ErrLeaseConflict) || errors.Is(err, inbox.ErrStaleToken) {
				continue // finished or taken over meanwhile
			}
			if !errors.Is(err, inbox.ErrLeaseExpired) {
				return reaped, err
			}
			// The lease ran out: take it back to report the failure.
			c, cerr := s.Claim(ctx, t.Name, t.ThreadID, 60)
			if cerr != nil {
				continue
			}
			if err := deliver(ctx, s, t, c.Lease.LeaseToken, o); err != nil {
				return reaped, err
			}
		}
		s.SetTaskRunner(ctx, t.Name, nil)
		os.Remove(outPath)
		reaped = append(reaped, t.Name)
	}
	return reaped, nil
}

// leaseLapsed reports whether task t's lease is no longer live: it
// expired, or the daemon released it since.
func leaseLapsed(ctx context.Context, s inbox.Bus, t *inbox.Task) bool {
	v, err := s.Show(ctx, t.ThreadID)
	if err != nil || v.Lease == nil {
		return false
	}
	return !v.Lease.Live(time.Now())
}

// tail keeps the last max bytes written to it (at least; it trims in
// steps), where the explanation of a failure is.
type tail struct {
	bytes.Buffer
	max int
}

func (t *tail) Write(p []byte) (int, error) {
	t.Buffer.Write(p)
	if t.Len() > 2*t.max {
		b := t.Bytes()
		keep := append([]byte(nil), b[len(b)-t.max:]...)
		t.Reset()
		t.Buffer.Write(keep)
	}
	return len(p), nil
}

// String returns the last max bytes, as valid UTF-8.
func (t *tail) String() string {
	b := t.Bytes()
	if len(b) > t.max {
		b = b[len(b)-t.max:]
	}
	return strings.ToValidUTF8(string(b), "\uFFFD")
}

// lastLine is the last line of s (standard error's last line says why a
// process failed), shortened.
func lastLine(s string) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	return inbox.Shorten(strings.TrimSpace(lines[len(lines)-1]), 300)
}
