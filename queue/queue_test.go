package queue_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/inbox-dev/inbox"
	"github.com/inbox-dev/inbox/queue"
	"github.com/inbox-dev/inbox/spool"
)

// roomyBus is a store whose file system has room for only so much
// content of some fields (SizeChecker), as a nearly full disk has.
type roomyBus struct {
	inbox.Bus
	room   int64
	fields []string // the fields it bounds
}

func (b roomyBus) CheckSize(field string, n int64) error {
	for _, f := range b.fields {
		if f == field && n > b.room {
			return inbox.TooLarge(field, n, b.room, "the room on the store's file system (test)", "free space on it")
		}
	}
	return nil
}

// runTask pushes a task that runs command on bus (whose store is at
// dir), runs it to the end and returns the message its parent got.
func runTask(t *testing.T, bus inbox.Bus, dir, name, command string) *inbox.Message {
	t.Helper()
	if _, err := bus.Push(t.Context(), inbox.TaskSpec{Name: name, Parent: "main", Owner: "main"}, "go"); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	err := queue.Run(ctx, queue.Config{Store: bus, DB: dir, Exec: command, Tasks: []string{name},
		Log: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	m, err := bus.Receive(ctx, "main", name, false, inbox.WaitOptions{})
	if err != nil || m == nil {
		t.Fatalf("receive from %s: got %v, %v; want its message", name, m, err)
	}
	return m
}

func openStore(t *testing.T) (*spool.Store, string) {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "store")
	if _, err := spool.Init(dir, false); err != nil {
		t.Fatal(err)
	}
	s, err := spool.Open(t.Context(), dir, spool.Options{})
	if err != nil {
		t.Fatal(err)
	}
	return s, dir
}

// leftBehind fails the test when the store holds a temp file or a
// capture file.
func leftBehind(t *testing.T, dir string) {
	t.Helper()
	for _, pat := range []string{"tmp/*", "tasks/*.out"} {
		if m, _ := filepath.Glob(filepath.Join(dir, pat)); len(m) > 0 {
			t.Errorf("left behind: %v", m)
		}
	}
}

// taskPayload is what the tests read of a task result's payload.
type taskPayload struct {
	Success   bool   `json:"success"`
	Error     string `json:"error"`
	Partial   string `json:"partial_output"`
	Truncated bool   `json:"partial_output_truncated"`
	Blob      string `json:"partial_output_blob"`
}

// payload decodes m's payload as a task's result.
func payload(t *testing.T, m *inbox.Message) taskPayload {
	t.Helper()
	var p taskPayload
	if err := json.Unmarshal(m.PayloadJSON, &p); err != nil {
		t.Fatalf("payload %.300s: %v", m.PayloadJSON, err)
	}
	return p
}

// A task printing for ever on a store whose file system has room for 3
// MiB of output is stopped there, and fails at once saying so, with the
// last of its output.
func TestOutputStopsAtTheStoresRoom(t *testing.T) {
	s, dir := openStore(t)
	bus := roomyBus{Bus: s, room: 3 << 20, fields: []string{"output"}}
	m := runTask(t, bus, dir, "endless", "yes")
	p := payload(t, m)
	if p.Success || !p.Truncated {
		t.Errorf("got success %v, truncated %v; want false, true", p.Success, p.Truncated)
	}
	if !strings.Contains(p.Error, "the room on the store's file system") {
		t.Errorf("got error %q, want it to name the room", p.Error)
	}
	if len(p.Partial) != 64<<10 || strings.Trim(p.Partial, "y\n") != "" {
		t.Errorf("got %d bytes of partial output starting %.8q, want the last 64 KiB of yes", len(p.Partial), p.Partial)
	}
	leftBehind(t, dir)
}

// Output the store would refuse inline (no room for it twice: its
// message and its log line) is the result all the same, as a blob.
func TestOutputWithoutRoomInlineIsABlob(t *testing.T) {
	s, dir := openStore(t)
	bus := roomyBus{Bus: s, room: 100 << 10, fields: []string{"body"}}
	m := runTask(t, bus, dir, "wide", "head -c 200000 /dev/zero | tr '\\0' w")
	if m.Kind != inbox.KindResult || m.Status != inbox.StatusDone || m.Body != "" {
		t.Fatalf("got kind %s, status %s, %d bytes of body; want a done result without body", m.Kind, m.Status, len(m.Body))
	}
	if len(m.Artifacts) != 1 || m.Artifacts[0].Kind != "blob" {
		t.Fatalf("got artifacts %+v, want one blob", m.Artifacts)
	}
	data, err := os.ReadFile(m.Artifacts[0].Path)
	if err != nil {
		t.Fatal(err)
	}
	if want := strings.Repeat("w", 200000); string(data) != want {
		t.Errorf("got %d bytes of output, want 200000 bytes of w", len(data))
	}
	leftBehind(t, dir)
}

// maxBus is a bus that says its maximum (MaxBlob) without bounding
// content itself.
type maxBus struct {
	inbox.Bus
	max int64
}

func (b maxBus) MaxBlob() int64 { return b.max }

// A failing task whose output is under the maximum, but whose payload
// would not be (JSON doubles a newline), keeps its output whole as a blob.
func TestPartialOutputOverPayloadLimitIsABlob(t *testing.T) {
	s, dir := openStore(t)
	bus := roomyBus{Bus: s, room: 1 << 20, fields: []string{"payload_json"}}
	m := runTask(t, bus, dir, "newlines", "head -c 900000 /dev/zero | tr '\\0' '\\n'; exit 3")
	p := payload(t, m)
	if p.Success || p.Partial != "" || p.Blob == "" {
		t.Fatalf("got payload %.300s, want a failure whose partial output is a blob", m.PayloadJSON)
	}
	rc, err := s.OpenBlob(t.Context(), p.Blob)
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	data, _ := io.ReadAll(rc)
	if len(data) != 900000 || strings.Trim(string(data), "\n") != "" {
		t.Errorf("got %d bytes of partial output, want the 900000 newlines", len(data))
	}
	leftBehind(t, dir)
}

// A bus that says its maximum bounds output though it bounds nothing
// else: the runner asks it.
func TestOutputStopsAtTheBusMaximum(t *testing.T) {
	s, dir := openStore(t)
	m := runTask(t, maxBus{Bus: s, max: 256 << 10}, dir, "zeros", "cat /dev/zero")
	p := payload(t, m)
	if p.Success || !strings.Contains(p.Error, "output over the store's maximum of 256 KiB (max_blob)") || p.Blob == "" {
		t.Errorf("got payload %.300s, want a failure naming the maximum with its last zeros as a blob", m.PayloadJSON)
	}
	leftBehind(t, dir)
}

// A task whose runner died after starting it, and whose lease lapsed and
// was released since (the daemon's expiry made its thread pending
// again), is never started again: it stays running, a runner given it
// passes it over (nothing is executed), and Reap reports it failed to
// its parent.
func TestStartedTaskNeverRunsAgain(t *testing.T) {
	s, dir := openStore(t)
	task, err := s.Push(t.Context(), inbox.TaskSpec{Name: "lapsed", Parent: "main", Owner: "main"}, "go")
	if err != nil {
		t.Fatal(err)
	}
	// Started by a runner that died at once, its lease 1 s.
	if _, err := s.StartTask(t.Context(), task, 1); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		expired, err := s.ExpireLease(t.Context(), task.ThreadID)
		if err != nil {
			t.Fatal(err)
		}
		if expired {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the task's 1 s lease did not expire within 10 s")
		}
		time.Sleep(50 * time.Millisecond)
	}
	now, err := s.TaskByName(t.Context(), "lapsed")
	if err != nil || now.Status != inbox.StatusPending || now.State() != "running" {
		t.Fatalf("after its lease lapsed: %+v (%v), want status pending, state running", now, err)
	}
	ran := filepath.Join(t.TempDir(), "ran")
	err = queue.Run(t.Context(), queue.Config{Store: s, DB: dir, Exec: "echo ran >> " + ran, Tasks: []string{"lapsed"},
		Log: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(ran); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("the task was executed again (%v)", err)
	}
	reaped, err := queue.Reap(t.Context(), s, []*inbox.Task{now})
	if err != nil || len(reaped) != 1 {
		t.Fatalf("reap: %v, %v; want the task failed", reaped, err)
	}
	m, err := s.Receive(t.Context(), "main", "lapsed", false, inbox.WaitOptions{})
	if err != nil || m == nil {
		t.Fatalf("receive: %v, %v", m, err)
	}
	if p := payload(t, m); p.Success || !strings.Contains(p.Error, "died") {
		t.Errorf("got payload %s, want the failure of a runner that died", m.PayloadJSON)
	}
	if fin, _ := s.TaskByName(t.Context(), "lapsed"); fin.State() != "finished" || fin.Status != inbox.StatusFailed {
		t.Errorf("after reap: %+v, want finished, failed", fin)
	}
}
