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
// at most inbox.MaxInline bytes, else a blob the message points at. A
// task is claimed (leased to the task's name) before it starts, so two
// runners never start the same task. A runner that dies mid-task leaves a
// record of its process (SetTaskRunner); Reap, which queue, run,
// receive and check call, fails such a task visibly — killing whatever is
// left of its process group — so nothing is silently running forever.
// Cancel kills a running task's process group and delivers the failure.
// A task's message goes when its process exits, or at its timeout,
// whatever the processes it started outside its process group (setsid)
// do: they may keep its output open, never its message back.
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
	Log         *slog.Logger
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
	env := withoutEnv(os.Environ(), "INBOX_DB", inbox.EnvNATSPassword, inbox.EnvNATSPasswordFile)
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

func runOne(ctx context.Context, cfg Config, name string) error {
	s := cfg.Store
	t, err := s.TaskByName(name)
	if err != nil {
		return err
	}
	if t.State() != "queued" {
		return nil // started or finished by someone else meanwhile
	}
	timeout := time.Duration(t.TimeoutSeconds) * time.Second
	if timeout == 0 {
		timeout = cfg.DefaultTimeout
	}
	lease := leaseFor(timeout)
	claimed, err := s.Claim(name, t.ThreadID, lease)
	if errors.Is(err, inbox.ErrLeaseConflict) || errors.Is(err, inbox.ErrInvalidState) {
		return nil // another runner took it
	}
	if err != nil {
		return err
	}
	token := claimed.Lease.LeaseToken
	outPath, err := s.TaskOutputPath(name)
	if err != nil {
		return deliverRetrying(ctx, cfg, t, token, false, "cannot capture the task's output: "+err.Error(), "", "")
	}
	out, err := os.OpenFile(outPath, os.O_CREATE|os.O_TRUNC|os.O_WRONLY, 0o600)
	if err != nil {
		return deliverRetrying(ctx, cfg, t, token, false, "cannot capture the task's output: "+err.Error(), "", "")
	}
	defer os.Remove(outPath)
	defer out.Close()
	cmd := taskCommand(cfg.Exec, cfg.Umask)
	if t.PromptBlob != "" {
		pf, err := s.OpenBlob(t.PromptBlob)
		if err != nil {
			return deliverRetrying(ctx, cfg, t, token, false, "cannot read the task's prompt: "+err.Error(), "", "")
		}
		defer pf.Close()
		cmd.Stdin = pf
	} else {
		cmd.Stdin = strings.NewReader(t.Prompt)
	}
	// Standard error comes through a pipe of our own rather than one
	// exec copies from: Wait then returns when the task's process exits,
	// even while a process it started in another session (setsid) holds
	// the pipe open. WaitDelay bounds exec's copy of the prompt to stdin
	// the same way.
	var stderr tail
	stderr.max = maxStderr
	errR, errW, err := os.Pipe()
	if err != nil {
		return deliverRetrying(ctx, cfg, t, token, false, "cannot capture the task's standard error: "+err.Error(), "", "")
	}
	defer errR.Close()
	cmd.Stdout, cmd.Stderr = out, errW
	cmd.WaitDelay = drainDelay
	cmd.Env = append(slices.Clip(cfg.env),
		"INBOX_TASK_NAME="+name, "INBOX_AGENT="+name, "INBOX_THREAD="+t.ThreadID,
		"INBOX_PARENT="+t.Parent, "INBOX_MODEL="+t.Model, "INBOX_DB="+cfg.DB)
	cmd.SysProcAttr = procAttr()
	started := time.Now()
	err = cmd.Start()
	errW.Close() // the task holds it now
	if err != nil {
		return deliverRetrying(ctx, cfg, t, token, false, "cannot start the task: "+err.Error(), "", "")
	}
	drained := make(chan struct{})
	go func() {
		io.Copy(&stderr, errR)
		close(drained)
	}()
	pgid := cmd.Process.Pid
	rec := &inbox.TaskRunner{RunnerPID: os.Getpid(), RunnerStart: procStart(os.Getpid()), PGID: pgid, StartedAt: inbox.FormatTime(started)}
	if err := s.SetTaskRunner(name, rec); err != nil {
		cfg.Log.Warn("cannot record the task's runner", "task", name, "error", err)
	}
	defer s.SetTaskRunner(name, nil)
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
	var waitErr error
loop:
	for {
		select {
		case waitErr = <-done:
			break loop
		case <-renew.C:
			if _, err := s.Renew(name, t.ThreadID, lease, token); err != nil {
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
	// started elsewhere may hold standard error open for ever: what is in
	// the pipe is read, for drainDelay at most.
	syscall.Kill(-pgid, syscall.SIGKILL)
	errR.SetReadDeadline(time.Now().Add(drainDelay))
	<-drained
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
	cfg.Log.Info("task finished", "task", name, "success", ok, "error", why, "seconds", time.Since(started).Seconds())
	return deliverRetrying(ctx, cfg, t, token, ok, why, outPath, stderr.String())
}

// withoutEnv returns environ without the variables keys names.
func withoutEnv(environ []string, keys ...string) []string {
	var out []string
	for _, kv := range environ {
		name, _, _ := strings.Cut(kv, "=")
		if !slices.Contains(keys, name) {
			out = append(out, kv)
		}
	}
	return out
}

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

// deliverRetrying delivers a finished task's message, retrying while the
// store refuses for a storage error (a full disk may be freed): a task
// must not stay "running" after its process exited. It gives up when the
// runner is stopped; then Reap reports the task failed.
func deliverRetrying(ctx context.Context, cfg Config, t *inbox.Task, token int64, ok bool, why, outPath, stderr string) error {
	wait := 100 * time.Millisecond
	for {
		err := deliver(cfg.Store, t, token, ok, why, outPath, stderr)
		switch {
		case err == nil:
			return nil
		case errors.Is(err, inbox.ErrInvalidState):
			// Finished meanwhile: cancelled (which delivered the failure),
			// or reaped.
			cfg.Log.Info("task already finished; its result was not needed", "task", t.Name, "error", err)
			return nil
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
// inline text when it is UTF-8 without NUL bytes and at most
// spool.MaxInline bytes, else a blob adopted from the capture file.
func output(s inbox.Bus, outPath, field string) (text string, blob *inbox.Blob, err error) {
	if outPath == "" {
		return "", nil, nil
	}
	fi, err := os.Stat(outPath)
	if errors.Is(err, os.ErrNotExist) {
		return "", nil, nil
	}
	if err != nil {
		return "", nil, err
	}
	if fi.Size() <= inbox.MaxInline {
		data, err := os.ReadFile(outPath)
		if err != nil {
			return "", nil, err
		}
		if utf8.Valid(data) && bytes.IndexByte(data, 0) < 0 {
			return string(data), nil, nil
		}
	}
	b, err := s.AdoptBlob(field, outPath)
	return "", b, err
}

// deliver finishes the task's thread: done with its output as the result,
// or failed with the error and partial output. Either way the parent gets
// a message from the task.
func deliver(s inbox.Bus, t *inbox.Task, token int64, ok bool, why, outPath, stderr string) error {
	if ok {
		text, blob, err := output(s, outPath, "body")
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
		_, err = s.Done(t.Name, t.ThreadID, token, c)
		return err
	}
	c, err := failure(s, why, outPath)
	if err != nil {
		return err
	}
	c.Summary, c.Body = "task "+t.Name+" failed: "+inbox.Shorten(why, 300), stderr
	_, err = s.Fail(t.Name, t.ThreadID, token, c)
	return err
}

// failure is the content of a failure message: the payload
// {"success":false,"error":…,"partial_output":…}, with a partial output
// that cannot be inline in a blob ("partial_output_blob" names it).
func failure(s inbox.Bus, why, outPath string) (inbox.Content, error) {
	text, blob, err := output(s, outPath, "partial_output")
	if err != nil {
		return inbox.Content{}, err
	}
	p := map[string]any{"success": false, "error": why, "partial_output": text}
	var c inbox.Content
	if blob != nil {
		p["partial_output_blob"] = blob.Ref()
		c.Blobs = []*inbox.Blob{blob}
	}
	payload, err := json.Marshal(p)
	if err != nil {
		return inbox.Content{}, err
	}
	c.PayloadJSON = string(payload)
	return c, nil
}

// Cancel cancels a task on behalf of agent: a queued one is never started,
// a running one's process group is killed (SIGTERM, then SIGKILL after
// grace). Either way the parent gets the failure message, with the
// output so far as partial_output.
func Cancel(s inbox.Bus, t *inbox.Task, agent, reason, key string, grace time.Duration) (*inbox.Result, error) {
	why := "cancelled by " + agent
	if reason != "" {
		why += ": " + reason
	}
	outPath, _ := s.TaskOutputPath(t.Name)
	c, err := failure(s, why, outPath)
	if err != nil {
		return nil, err
	}
	c.Summary, c.IdempotencyKey = "task "+t.Name+" "+inbox.Shorten(why, 300), key
	// Cancelled first, then killed: the runner, finding the thread
	// finished when its process exits, delivers nothing more.
	res, err := s.CancelTask(agent, t, c)
	if err != nil {
		return nil, err
	}
	// The runner records its process a moment after starting it: look
	// again now rather than trust what t was read with.
	r := t.Runner
	if now, err := s.TaskByName(t.Name); err == nil && now.Runner != nil {
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
func Reap(s inbox.Bus, tasks []*inbox.Task) ([]string, error) {
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
			// and the lease.
			started, perr := time.Parse(time.RFC3339Nano, t.StartedAt)
			alive = !leaseExpired(s, t) && (perr != nil || time.Since(started) < unrecordedGrace)
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
		outPath, _ := s.TaskOutputPath(t.Name)
		if err := deliver(s, t, t.LeaseToken, false, why, outPath, ""); err != nil {
			if errors.Is(err, inbox.ErrInvalidState) || errors.Is(err, inbox.ErrLeaseConflict) || errors.Is(err, inbox.ErrStaleToken) {
				continue // finished or taken over meanwhile
			}
			if !errors.Is(err, inbox.ErrLeaseExpired) {
				return reaped, err
			}
			// The lease ran out: take it back to report the failure.
			c, cerr := s.Claim(t.Name, t.ThreadID, 60)
			if cerr != nil {
				continue
			}
			if err := deliver(s, t, c.Lease.LeaseToken, false, why, outPath, ""); err != nil {
				return reaped, err
			}
		}
		s.SetTaskRunner(t.Name, nil)
		os.Remove(outPath)
		reaped = append(reaped, t.Name)
	}
	return reaped, nil
}

func leaseExpired(s inbox.Bus, t *inbox.Task) bool {
	v, err := s.Show(t.ThreadID)
	if err != nil || v.Lease == nil {
		return false
	}
	return !v.Lease.Live(time.Now()) && !v.Lease.Released()
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
