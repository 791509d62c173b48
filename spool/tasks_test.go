package spool_test

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/inbox-dev/inbox"
	"github.com/inbox-dev/inbox/internal/storetest"
	"github.com/inbox-dev/inbox/spool"
)

// finishedTask pushes task name and runs it to done: its thread id.
func finishedTask(t *testing.T, s *spool.Store, name string) string {
	t.Helper()
	task, err := s.Push(t.Context(), inbox.TaskSpec{Name: name}, "do "+name)
	if err != nil {
		t.Fatalf("push %s: %v", name, err)
	}
	if _, err := s.Claim(t.Context(), name, task.ThreadID, 60); err != nil {
		t.Fatalf("claim %s: %v", name, err)
	}
	if _, err := s.Done(t.Context(), name, task.ThreadID, 0, inbox.Content{Summary: "done"}); err != nil {
		t.Fatalf("done %s: %v", name, err)
	}
	return task.ThreadID
}

// threadsOf lists the thread ids of the tasks named name, oldest first.
func threadsOf(t *testing.T, s *spool.Store, name string) []string {
	t.Helper()
	tasks, err := s.Tasks(t.Context(), inbox.TaskFilter{})
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, k := range tasks {
		if k.Name == name {
			out = append(out, k.ThreadID)
		}
	}
	return out
}

// TestTaskNameCrashes: what a push that takes a finished task's name
// leaves when it is cut off — the finished task linked into the history
// while the name still names it, or the name taken for a thread that
// never committed — reads as the finished task, listed once, and the next
// push takes the name.
func TestTaskNameCrashes(t *testing.T) {
	s, db := storetest.New(t, spool.Options{})
	tasks := filepath.Join(db, "tasks")
	t1 := finishedTask(t, s, "a")

	// Cut off after the history link, before the name was replaced.
	hist := filepath.Join(tasks, "finished", "a", t1+".json")
	if err := os.MkdirAll(filepath.Dir(hist), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Link(filepath.Join(tasks, "a.json"), hist); err != nil {
		t.Fatal(err)
	}
	if got := threadsOf(t, s, "a"); len(got) != 1 || got[0] != t1 {
		t.Errorf("tasks named a: got %v, want [%s]", got, t1)
	}
	if got, err := s.TaskByName(t.Context(), "a"); err != nil || got.ThreadID != t1 {
		t.Errorf("TaskByName: got %v, %v; want %s", got, err, t1)
	}
	t2 := finishedTask(t, s, "a")
	if got := threadsOf(t, s, "a"); len(got) != 2 || got[0] != t1 || got[1] != t2 {
		t.Errorf("tasks named a: got %v, want [%s %s]", got, t1, t2)
	}

	// The name taken for a thread that never committed: a copy of t2's
	// prompt under another thread id, as the link of a push cut off
	// before its commit point would read.
	data, err := os.ReadFile(filepath.Join(tasks, "a.json"))
	if err != nil {
		t.Fatal(err)
	}
	ghost := bytes.ReplaceAll(data, []byte(t2), []byte("thr_"+strings.Repeat("z", len(t2)-4)))
	if err := os.Link(filepath.Join(tasks, "a.json"), filepath.Join(tasks, "finished", "a", t2+".json")); err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(filepath.Join(tasks, "a.json")); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(tasks, "a.json"), ghost, 0o600); err != nil {
		t.Fatal(err)
	}
	if got, err := s.TaskByName(t.Context(), "a"); err != nil || got.ThreadID != t2 {
		t.Errorf("TaskByName past a push that never committed: got %v, %v; want %s", got, err, t2)
	}
	if got := threadsOf(t, s, "a"); len(got) != 2 || got[1] != t2 {
		t.Errorf("tasks named a: got %v, want [%s %s]", got, t1, t2)
	}
	if tk, err := s.TaskByThread(t.Context(), t1); err != nil || tk.Name != "a" {
		t.Errorf("TaskByThread(%s) of the history: got %v, %v", t1, tk, err)
	}
	t3 := finishedTask(t, s, "a")
	if got := threadsOf(t, s, "a"); len(got) != 3 || got[2] != t3 {
		t.Errorf("tasks named a: got %v, want 3 ending with %s", got, t3)
	}
}

// TestTaskNameTakenWhileLive: a queued or running task keeps its name.
func TestTaskNameTakenWhileLive(t *testing.T) {
	s, _ := storetest.New(t, spool.Options{})
	task, err := s.Push(t.Context(), inbox.TaskSpec{Name: "b"}, "do b")
	if err != nil {
		t.Fatal(err)
	}
	for _, state := range []string{"queued", "running"} {
		_, err := s.Push(t.Context(), inbox.TaskSpec{Name: "b"}, "again")
		var e *inbox.Error
		if !errors.As(err, &e) || e.Code != "task_name_taken" {
			t.Errorf("push of b while %s: got %v, want task_name_taken", state, err)
		}
		if _, err := s.Claim(t.Context(), "b", task.ThreadID, 60); err != nil && state == "queued" {
			t.Fatal(err)
		}
	}
}
