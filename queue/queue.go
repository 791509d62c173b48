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
// Every task the runner starts ends with a message to its parent. A task
// is claimed (leased to the task's name) before it starts, so two runners
// never start the same task. A runner that dies mid-task leaves a record
// (tasks/NAME.runner) naming its process; Reap, which queue, run, receive
// and check call, fails such a task visibly — killing whatever is left of
// its process group — so nothing is silently running forever.
package queue

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/inbox-dev/inbox/spool"
)

// Config is what one runner runs.
type Config struct {
	Store       *spool.Store
	DB          string   // the store's absolute path, given to tasks as INBOX_DB
	Exec        string   // the command, run as sh -c Exec
	Concurrency int      // at most this many at once; 0 means all
	Tasks       []string // task names, started in this order
	Log         *slog.Logger
	// Grace is how long a timed-out task's process group has between
	// SIGTERM and SIGKILL (default 2 s).
	Grace time.Duration
}

// runnerRecord is tasks/NAME.runner: who runs a task.
type runnerRecord struct {
	RunnerPID   int    `json:"runner_pid"`
	RunnerStart uint64 `json:"runner_start"` // the runner's start time in clock ticks since boot
	PGID        int    `json:"pgid"`
	StartedAt   string `json:"started_at"`
}

// maxOutput bounds the stdout kept from a task (its result message body).
const maxOutput = spool.MaxBodyLen

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
func leaseFor(t *spool.Task) int {
	if t.TimeoutSeconds > 0 {
		return t.TimeoutSeconds + 60
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
	lease := leaseFor(t)
	claimed, err := s.Claim(name, t.ThreadID, lease)
	if errors.Is(err, spool.ErrLeaseConflict) || errors.Is(err, spool.ErrInvalidState) {
		return nil // another runner took it
	}
	if err != nil {
		return err
	}
	token := claimed.Lease.LeaseToken
	cmd := exec.Command("/bin/sh", "-c", cfg.Exec)
	cmd.Stdin = strings.NewReader(t.Prompt)
	var stdout, stderr capped
	stdout.max, stderr.max = maxOutput, 64<<10
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	cmd.Env = append(os.Environ(),
		"INBOX_TASK_NAME="+name, "INBOX_AGENT="+name, "INBOX_THREAD="+t.ThreadID,
		"INBOX_PARENT="+t.Parent, "INBOX_MODEL="+t.Model, "INBOX_DB="+cfg.DB)
	cmd.SysProcAttr = procAttr()
	started := time.Now()
	if err := cmd.Start(); err != nil {
		return deliver(s, t, token, false, "cannot start the task: "+err.Error(), "", "")
	}
	pgid := cmd.Process.Pid
	rec := runnerRecord{RunnerPID: os.Getpid(), RunnerStart: procStart(os.Getpid()), PGID: pgid, StartedAt: spool.FormatTime(started)}
	data, _ := json.Marshal(rec)
	if err := os.WriteFile(s.TaskRunnerFile(name), data, 0o600); err != nil {
		cfg.Log.Warn("cannot record the task's runner", "task", name, "error", err)
	}
	defer os.Remove(s.TaskRunnerFile(name))
	cfg.Log.Info("task started", "task", name, "thread", t.ThreadID, "pgid", pgid)

	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	var timeout <-chan time.Time
	if t.TimeoutSeconds > 0 {
		timer := time.NewTimer(time.Duration(t.TimeoutSeconds) * time.Second)
		defer timer.Stop()
		timeout = timer.C
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
		case <-timeout:
			why = fmt.Sprintf("timed out after %ds", t.TimeoutSeconds)
			waitErr = stop(pgid, done, cfg.Grace)
			break loop
		case <-ctx.Done():
			why = "the runner was stopped"
			waitErr = stop(pgid, done, cfg.Grace)
			break loop
		}
	}
	// Whatever the task started in its group goes with it.
	syscall.Kill(-pgid, syscall.SIGKILL)
	ok := why == "" && waitErr == nil
	if why == "" && waitErr != nil {
		why = waitErr.Error()
		if e := strings.TrimSpace(stderr.String()); e != "" {
			why += ": " + lastLine(e)
		}
	}
	cfg.Log.Info("task finished", "task", name, "success", ok, "error", why, "seconds", time.Since(started).Seconds())
	return deliver(s, t, token, ok, why, stdout.String(), stderr.String())
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

// deliver finishes the task's thread: done with stdout as the result, or
// failed with the error and partial output. Either way the parent gets a
// message from the task.
func deliver(s *spool.Store, t *spool.Task, token int64, ok bool, why, stdout, stderr string) error {
	if ok {
		summary := lastLineOr(firstLineOf(stdout), "task "+t.Name+" finished")
		_, err := s.Done(t.Name, t.ThreadID, token, spool.Content{Summary: summary, Body: stdout})
		return err
	}
	payload, _ := json.Marshal(map[string]any{"success": false, "error": why, "partial_output": stdout})
	_, err := s.Fail(t.Name, t.ThreadID, token, spool.Content{Summary: "task " + t.Name + " failed: " + cutTo(why, 300),
		Body: stderr, PayloadJSON: string(payload)})
	return err
}

// Reap fails running tasks whose runner is gone: the runner process no
// longer exists (or is another process with the same pid), or, with no
// record of a runner, the task's lease has expired. Whatever is left of
// the task's process group is killed. It returns the names it failed.
func Reap(s *spool.Store, tasks []*spool.Task) ([]string, error) {
	var reaped []string
	for _, t := range tasks {
		if t.State() != "running" {
			continue
		}
		var rec runnerRecord
		data, err := os.ReadFile(s.TaskRunnerFile(t.Name))
		alive := false
		switch {
		case err == nil && json.Unmarshal(data, &rec) == nil:
			alive = procStart(rec.RunnerPID) == rec.RunnerStart && rec.RunnerStart != 0
		default:
			// No record: the runner died between claiming and starting,
			// or the record is gone; the lease tells.
			alive = !leaseExpired(s, t)
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
		if err := deliver(s, t, t.LeaseToken, false, why, "", ""); err != nil {
			if errors.Is(err, spool.ErrInvalidState) || errors.Is(err, spool.ErrLeaseConflict) || errors.Is(err, spool.ErrStaleToken) {
				continue // finished or taken over meanwhile
			}
			if !errors.Is(err, spool.ErrLeaseExpired) {
				return reaped, err
			}
			// The lease ran out: take it back to report the failure.
			c, cerr := s.Claim(t.Name, t.ThreadID, 60)
			if cerr != nil {
				continue
			}
			if err := deliver(s, t, c.Lease.LeaseToken, false, why, "", ""); err != nil {
				return reaped, err
			}
		}
		os.Remove(s.TaskRunnerFile(t.Name))
		reaped = append(reaped, t.Name)
	}
	return reaped, nil
}

func leaseExpired(s *spool.Store, t *spool.Task) bool {
	v, err := s.Show(t.ThreadID)
	if err != nil || v.Lease == nil {
		return false
	}
	return !v.Lease.Live(time.Now()) && v.Lease.ReleasedAt == ""
}

// capped keeps at most max bytes written to it (the first ones).
type capped struct {
	bytes.Buffer
	max int
}

func (c *capped) Write(p []byte) (int, error) {
	if room := c.max - c.Len(); room > 0 {
		c.Buffer.Write(p[:min(len(p), room)])
	}
	return len(p), nil
}

func firstLineOf(s string) string {
	for _, l := range strings.Split(s, "\n") {
		if l = strings.TrimSpace(l); l != "" {
			return cutTo(l, 200)
		}
	}
	return ""
}

func lastLine(s string) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	return cutTo(strings.TrimSpace(lines[len(lines)-1]), 300)
}

func lastLineOr(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

func cutTo(s string, n int) string {
	if r := []rune(s); len(r) > n {
		return string(r[:n-1]) + "…"
	}
	return s
}
