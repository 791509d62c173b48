package spool

import (
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/inbox-dev/inbox"
)

func TestRoomFor(t *testing.T) {
	const MiB, GiB = 1 << 20, 1 << 30
	for _, tc := range []struct {
		free, total, want int64
	}{
		{10 * GiB, 100 * GiB, 10*GiB - 64*MiB}, // a large file system keeps 64 MiB
		{50 * MiB, 100 * MiB, 45 * MiB},        // a small one a twentieth
		{3 * MiB, 100 * MiB, 0},                // less free than the margin: no room
		{0, 0, 0},
	} {
		if got := roomFor(fsSpace{free: tc.free, total: tc.total}); got != tc.want {
			t.Errorf("roomFor(free %d, total %d) = %d, want %d", tc.free, tc.total, got, tc.want)
		}
	}
}

// The room is the real file system's: statfs of the store.
func TestRoomIsTheStoresFileSystem(t *testing.T) {
	s, db := openTemp(t)
	room, sp, ok := s.room()
	if !ok {
		t.Fatal("statfs of the store failed")
	}
	var st syscall.Statfs_t
	if err := syscall.Statfs(db, &st); err != nil {
		t.Fatal(err)
	}
	if total := int64(st.Blocks) * int64(st.Bsize); sp.total != total {
		t.Errorf("total %d, statfs says %d", sp.total, total)
	}
	free := int64(st.Bavail) * int64(st.Bsize)
	if d := sp.free - free; d > 64<<20 || d < -64<<20 {
		t.Errorf("free %d, statfs says %d", sp.free, free)
	}
	if room != roomFor(sp) {
		t.Errorf("room %d, want %d", room, roomFor(sp))
	}
}

// endless is a reader that never ends, counting what it gave.
type endless struct{ n int64 }

func (e *endless) Read(p []byte) (int, error) {
	for i := range p {
		p[i] = 'x'
	}
	e.n += int64(len(p))
	return len(p), nil
}

func wantTooLarge(t *testing.T, err error, field, limit string) {
	t.Helper()
	var se *inbox.Error
	if !errors.As(err, &se) || se.Code != "too_large" || se.Field != field || !errors.Is(err, inbox.ErrInvalidInput) {
		t.Fatalf("got %v, want too_large of %s", err, field)
	}
	if !strings.Contains(se.Rule, limit) {
		t.Errorf("%q does not name the limit %q", se.Rule, limit)
	}
}

func noTemps(t *testing.T, db string) {
	t.Helper()
	entries, err := os.ReadDir(filepath.Join(db, tmpDirName))
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		t.Errorf("tmp/%s left behind", e.Name())
	}
}

func TestStageBlobStopsPastTheMaximum(t *testing.T) {
	db := filepath.Join(t.TempDir(), "store")
	if _, err := InitWith(db, InitOptions{MaxBlob: 1 << 20}); err != nil {
		t.Fatal(err)
	}
	s, err := Open(t.Context(), db, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if s.MaxBlob() != 1<<20 {
		t.Fatalf("MaxBlob %d, want %d", s.MaxBlob(), 1<<20)
	}
	src := &endless{}
	_, err = s.StageBlob(t.Context(), "payload_json", src)
	wantTooLarge(t, err, "payload_json", "1 MiB (1048576 bytes)")
	if src.n > 1<<20+64<<10 {
		t.Errorf("read %d bytes of an endless source; the limit is %d", src.n, 1<<20)
	}
	noTemps(t, db)
	// At the limit it is taken.
	b, err := s.StageBlob(t.Context(), "body", io.LimitReader(&endless{}, 1<<20))
	if err != nil || b.Size != 1<<20 {
		t.Fatalf("StageBlob at the limit: %v, %v", b, err)
	}
	discard(b)
	// A body or payload given whole is held to it too.
	_, err = s.Send(t.Context(), inbox.SendInput{From: "a", To: "b", Subject: "s", Content: inbox.Content{Body: strings.Repeat("b", 1<<20+1)}})
	wantTooLarge(t, err, "body", "1 MiB")
	_, err = s.Send(t.Context(), inbox.SendInput{From: "a", To: "b", Subject: "s", Content: inbox.Content{PayloadJSON: `"` + strings.Repeat("p", 1<<20) + `"`}})
	wantTooLarge(t, err, "payload_json", "1 MiB")
	if n, _ := s.LastEventID(t.Context()); n != 0 {
		t.Errorf("a refused send wrote %d events", n)
	}
	noTemps(t, db)
}

// With less room on the disk than the maximum, the room is the limit.
func TestFullDiskRefuses(t *testing.T) {
	s, db := openTemp(t)
	const MiB = 1 << 20
	free := int64(70 * MiB) // a large file system keeps 64 MiB free: 6 MiB of room
	statfs = func(path string, st *syscall.Statfs_t) error {
		if err := syscall.Statfs(path, st); err != nil {
			return err
		}
		st.Bavail = uint64(free / int64(st.Bsize))
		st.Blocks = uint64((1 << 40) / int64(st.Bsize))
		return nil
	}
	defer func() { statfs = syscall.Statfs }()

	_, err := s.StageBlob(t.Context(), "body", &endless{})
	wantTooLarge(t, err, "body", "room on the store's file system")
	noTemps(t, db)
	// Inline content is written twice (its file, its log line).
	wantTooLarge(t, s.CheckSize("body", 4*MiB), "body", "free")
	if err := s.CheckSize("body", 2*MiB); err != nil {
		t.Errorf("2 MiB with 6 MiB of room: %v", err)
	}
	free = 0
	if err := s.CheckSize("body", 100<<10); err != nil {
		t.Errorf("small content is not weighed against the free space: %v", err)
	}
	_, err = s.Send(t.Context(), inbox.SendInput{From: "a", To: "b", Subject: "s", Content: inbox.Content{Body: strings.Repeat("b", 2*MiB)}})
	wantTooLarge(t, err, "body", "free")
	if n, _ := s.LastEventID(t.Context()); n != 0 {
		t.Errorf("a refused send wrote %d events", n)
	}
}
