package spool

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/inbox-dev/inbox"
	"github.com/inbox-dev/inbox/internal/testproc"
)

// TestPlantedRecords: a symbolic link, a FIFO or a socket planted in place
// of each kind of store record outside the thread directories (a team, an
// idempotency record, a task, a mailbox entry, the watermark, an agent's
// presence) never hangs an operation that reads or writes it and is never
// written through; fsck reports it and --repair leaves a clean store.
// (The thread files are covered by the CLI's TestPlantedStoreFiles.)
func TestPlantedRecords(t *testing.T) {
	type record struct {
		name string
		path func(db string) string
		ops  func(s *Store) // what reads or writes it
	}
	records := []record{
		{"team", func(db string) string { return filepath.Join(db, teamsDir, "t1.json") }, func(s *Store) {
			s.Team(t.Context(), "t1")
			s.Teams(t.Context())
			s.AddMembers(t.Context(), "a", "t1", []string{"c"})
			s.Send(t.Context(), inbox.SendInput{From: "a", To: "@t1", Subject: "to the team"})
		}},
		{"idempotency", func(db string) string { return filepath.Join(db, idemDir, idemHash("k1")+".json") }, func(s *Store) {
			s.Send(t.Context(), inbox.SendInput{From: "a", To: "b", Subject: "s", Content: inbox.Content{IdempotencyKey: "k1"}})
		}},
		{"task", func(db string) string { return filepath.Join(db, tasksDir, "job1.json") }, func(s *Store) {
			s.TaskByName(t.Context(), "job1")
			s.Tasks(t.Context(), inbox.TaskFilter{})
			s.Push(t.Context(), inbox.TaskSpec{Name: "job1", Owner: "a"}, "again")
		}},
		{"mailbox", func(db string) string {
			m, _ := filepath.Glob(filepath.Join(db, mailboxDir, "b", "*"))
			return m[0]
		}, func(s *Store) {
			s.Mailbox(t.Context(), "b", "")
			s.MailPeek(t.Context(), "b", 10)
			s.Collect(t.Context(), "b", "", false, 10)
		}},
		{"watermark", func(db string) string { return filepath.Join(db, durableFile) }, func(s *Store) {
			s.Checkpoint()
			s.Send(t.Context(), inbox.SendInput{From: "a", To: "b", Subject: "after"})
		}},
		{"presence", func(db string) string { return filepath.Join(db, agentsDir, "a") }, func(s *Store) {
			s.Agents(t.Context())
			s.Send(t.Context(), inbox.SendInput{From: "a", To: "b", Subject: "seen"})
		}},
	}
	for _, rec := range records {
		for _, plant := range testproc.PlantKinds {
			t.Run(rec.name+"/"+plant, func(t *testing.T) {
				s, db := openTemp(t)
				if _, err := s.CreateTeam(t.Context(), "a", "t1", []string{"a", "b"}); err != nil {
					t.Fatal(err)
				}
				if _, err := s.Send(t.Context(), inbox.SendInput{From: "a", To: "b", Subject: "s", Content: inbox.Content{IdempotencyKey: "k1"}}); err != nil {
					t.Fatal(err)
				}
				if _, err := s.Push(t.Context(), inbox.TaskSpec{Name: "job1", Owner: "a"}, "do it"); err != nil {
					t.Fatal(err)
				}
				victim := filepath.Join(t.TempDir(), "victim")
				if err := os.WriteFile(victim, []byte("not the store's\n"), 0o600); err != nil {
					t.Fatal(err)
				}
				p := rec.path(db)
				if err := os.Remove(p); err != nil {
					t.Fatal(err)
				}
				testproc.Plant(t, plant, p, victim)

				done := make(chan struct{})
				go func() {
					defer close(done)
					s2, err := Open(t.Context(), db, Options{})
					if err != nil {
						return // refused at open: no hang, nothing written
					}
					rec.ops(s2)
				}()
				select {
				case <-done:
				case <-time.After(30 * time.Second):
					t.Fatalf("an operation on the store hung on the planted %s", plant)
				}
				if b, _ := os.ReadFile(victim); string(b) != "not the store's\n" {
					t.Fatalf("written through the planted link: the target now holds %q", b)
				}
				rep, err := s.Fsck(t.Context(), false)
				if err != nil {
					t.Fatal(err)
				}
				if fi, err := os.Lstat(p); err == nil && !fi.Mode().IsRegular() {
					want := "planted_file"
					if plant == "symlink" {
						want = "symlink"
					}
					found := false
					for _, f := range rep.Findings {
						found = found || f.Check == want && f.Path == p
					}
					if !found {
						t.Errorf("fsck does not report the planted %s at %s: %+v", plant, p, rep.Findings)
					}
				}
				if _, err := s.Fsck(t.Context(), true); err != nil {
					t.Fatal(err)
				}
				if rep, err := s.Fsck(t.Context(), false); err != nil || !rep.Clean() {
					t.Fatalf("fsck after the repair: %v %+v", err, rep)
				}
			})
		}
	}
}

// TestPlantedPresence: a symbolic link, a FIFO or a socket planted in
// presence/<agent>/ as a wait file, or as presence/<agent> itself, hangs
// no reader of presence and is never read through (SPEC §8): through
// inbox.Bus, as the dashboard and the commands call them, Agents,
// Waits, a new wait of the agent (what receive, wait-reply and watch
// register) and FollowPresence, with inotify and polling, each return
// within a few seconds, and the live waits beside it still show, while
// the link's target (a wait file its own process holds) does not. fsck
// reports the planted file as it does any other, --repair sets it aside,
// and fsck is clean after it.
func TestPlantedPresence(t *testing.T) {
	for _, where := range []string{"wait-file", "agent-dir"} {
		for _, plant := range testproc.PlantKinds {
			t.Run(where+"/"+plant, func(t *testing.T) {
				st, db := openTemp(t)
				var s inbox.Bus = st // what the dashboard and the commands call
				ctx := t.Context()
				relV := s.WaitingOn(ctx, inbox.WaitInfo{Agent: "v", Reason: inbox.WaitOnReceive, From: "boss"})
				defer relV()

				// The link's target looks like a live wait: a wait file
				// whose lock a process (this one) holds. A reader that
				// followed the link would list it.
				victimDir := t.TempDir()
				victim := filepath.Join(victimDir, "4242-1.wait")
				content := `{"agent":"w","reason":"receive","from":"victim","since":"2020-01-01T00:00:00Z"}`
				if err := os.WriteFile(victim, []byte(content), 0o600); err != nil {
					t.Fatal(err)
				}
				vf, err := os.Open(victim)
				if err != nil {
					t.Fatal(err)
				}
				defer vf.Close()
				if err := syscall.Flock(int(vf.Fd()), syscall.LOCK_EX); err != nil {
					t.Fatal(err)
				}

				var p string
				wWaits := false // w has a wait of its own
				switch where {
				case "wait-file":
					p = filepath.Join(db, presenceDir, "w", "4242-1.wait")
					if err := os.MkdirAll(filepath.Dir(p), 0o700); err != nil {
						t.Fatal(err)
					}
					testproc.Plant(t, plant, p, victim)
				case "agent-dir":
					p = filepath.Join(db, presenceDir, "w")
					testproc.Plant(t, plant, p, victimDir)
				}

				// within runs fn, failing the test if it has not returned
				// after 5 s (a reader stuck opening the FIFO is let go
				// first, so that the test ends).
				within := func(what string, fn func()) {
					t.Helper()
					done := make(chan struct{})
					go func() {
						defer close(done)
						fn()
					}()
					select {
					case <-done:
					case <-time.After(5 * time.Second):
						if plant == "fifo" {
							if f, err := os.OpenFile(p, os.O_WRONLY|syscall.O_NONBLOCK, 0); err == nil {
								defer f.Close()
							}
						}
						t.Fatalf("%s hung on the %s planted at %s", what, plant, p)
					}
				}
				checkWaits := func(ws []inbox.WaitInfo, err error) {
					t.Helper()
					if err != nil {
						t.Fatalf("Waits: %v", err)
					}
					want := map[string]bool{"v": true}
					if wWaits {
						want["w"] = true
					}
					got := map[string]bool{}
					for _, w := range ws {
						if w.From == "victim" {
							t.Fatalf("Waits read through the planted %s: %+v", plant, ws)
						}
						got[w.Agent] = true
					}
					if !maps.Equal(got, want) {
						t.Fatalf("Waits lists %+v, want the waits of %v", ws, want)
					}
				}
				checkAgents := func(as []*inbox.AgentInfo, err error) {
					t.Helper()
					if err != nil {
						t.Fatalf("Agents: %v", err)
					}
					for _, a := range as {
						if (a.Agent == "v" || a.Agent == "w") && (a.State == inbox.StateWaiting) != (a.Agent == "v" || wWaits) {
							t.Fatalf("Agents says %s is %s (the planted %s at %s): %+v", a.Agent, a.State, plant, p, a)
						}
					}
				}

				within("Agents", func() { checkAgents(s.Agents(ctx)) })
				within("Waits", func() { checkWaits(s.Waits(ctx)) })
				if where == "wait-file" {
					// A live wait beside the planted file still shows.
					relW := s.WaitingOn(ctx, inbox.WaitInfo{Agent: "w", Reason: inbox.WaitOnReceive, From: "boss"})
					defer relW()
					wWaits = true
					within("Agents beside a live wait", func() { checkAgents(s.Agents(ctx)) })
					within("Waits beside a live wait", func() { checkWaits(s.Waits(ctx)) })
				}
				within("a new wait of w (receive, wait-reply, watch)", func() {
					s.Waiting(ctx, "w")()
					s.WaitingOn(ctx, inbox.WaitInfo{Agent: "w", Reason: inbox.WaitForReply, ThreadID: "thr_x"})()
				})
				for _, poll := range []bool{false, true} {
					within(fmt.Sprintf("FollowPresence (polling %v) and its readers", poll), func() {
						fctx, cancel := context.WithCancel(ctx)
						defer cancel()
						calls := 0
						relU := func() {}
						defer func() { relU() }()
						err := s.FollowPresence(fctx, inbox.WaitOptions{ForcePoll: poll}, func() {
							// What the dashboard does on each call; then a
							// wait that starts, for the follower to see.
							calls++
							checkWaits(s.Waits(fctx))
							checkAgents(s.Agents(fctx))
							if calls == 1 {
								relU = s.Waiting(fctx, "u")
							} else {
								cancel()
							}
						})
						if err != nil {
							t.Errorf("FollowPresence: %v", err)
						}
					})
				}

				if b, err := os.ReadFile(victim); err != nil || string(b) != content {
					t.Fatalf("the link's target was changed: %q %v", b, err)
				}
				if names, _ := os.ReadDir(victimDir); len(names) != 1 {
					t.Fatalf("a wait was made through the planted link: %v", names)
				}
				if fi, err := os.Lstat(p); err != nil || fi.Mode().IsRegular() || fi.IsDir() {
					t.Fatalf("the planted %s at %s was touched by a reader: %v %v", plant, p, fi, err)
				}

				rep, err := st.Fsck(ctx, false)
				if err != nil {
					t.Fatal(err)
				}
				want := inbox.Finding{Check: "planted_file", Path: p, Detail: map[string]string{"fifo": "a FIFO", "socket": "a socket"}[plant] +
					" inside the store, where inbox only makes regular files; it is neither read nor written"}
				if plant == "symlink" {
					want = inbox.Finding{Check: "symlink", Path: p, Detail: "a symbolic link to " + map[string]string{"wait-file": victim, "agent-dir": victimDir}[where] +
						" inside the store, which inbox never makes and does not write through"}
				}
				if !slices.Contains(rep.Findings, want) || len(rep.Findings) != 1 {
					t.Fatalf("fsck should report only %+v, got %+v", want, rep.Findings)
				}
				rep, err = st.Fsck(ctx, true)
				if err != nil || len(rep.Findings) != 1 || !rep.Findings[0].Repaired {
					t.Fatalf("fsck --repair: %v %+v", err, rep)
				}
				if _, err := os.Lstat(p); !errors.Is(err, fs.ErrNotExist) {
					t.Fatalf("%s is still there after the repair: %v", p, err)
				}
				if rep, err := st.Fsck(ctx, false); err != nil || !rep.Clean() {
					t.Fatalf("fsck after the repair: %v %+v", err, rep)
				}
				relW := s.WaitingOn(ctx, inbox.WaitInfo{Agent: "w", Reason: inbox.WaitForReply, ThreadID: "thr_y"})
				defer relW()
				wWaits = true
				within("Waits after the repair", func() { checkWaits(s.Waits(ctx)) })
				within("Agents after the repair", func() { checkAgents(s.Agents(ctx)) })
			})
		}
	}
}

// TestPlantedLocks: a symbolic link, a FIFO or a socket planted in place
// of one of the store's lock files (locks/) hangs no writer (the lock is
// opened without blocking, then refused) and creates nothing through the
// link; fsck reports it, --repair (which takes every lock) sets it aside
// first, and afterwards fsck is clean and every writer works again.
func TestPlantedLocks(t *testing.T) {
	for _, name := range []string{"events.lock", "idem.lock", "teams.lock", "thread", "checkpoint.lock", "flush.lock", "daemon.lock", searchLockFile} {
		for _, plant := range testproc.PlantKinds {
			t.Run(name+"/"+plant, func(t *testing.T) {
				s, db := openTemp(t)
				ctx := t.Context()
				if _, err := s.CreateTeam(ctx, "a", "t1", []string{"a", "b"}); err != nil {
					t.Fatal(err)
				}
				r, err := s.Send(ctx, inbox.SendInput{From: "a", To: "b", Subject: "s"})
				if err != nil {
					t.Fatal(err)
				}
				tid := r.Thread.ThreadID
				p := s.lockFile(name)
				if name == "thread" {
					p = s.threadLock(tid).Path()
				}
				ops := func(s *Store) error {
					if _, err := s.Send(ctx, inbox.SendInput{From: "a", To: "b", Subject: "again", Content: inbox.Content{IdempotencyKey: "k-" + plant}}); err != nil {
						return fmt.Errorf("send: %w", err)
					}
					if _, err := s.Reply(ctx, "a", "b", tid, inbox.KindProgress, inbox.Content{Summary: "ping"}); err != nil {
						return fmt.Errorf("reply: %w", err)
					}
					if _, err := s.AddMembers(ctx, "a", "t1", []string{"c"}); err != nil {
						return fmt.Errorf("add members: %w", err)
					}
					if err := s.Checkpoint(); err != nil {
						return fmt.Errorf("checkpoint: %w", err)
					}
					release, err := s.LockDaemon(ctx, "test")
					if err != nil {
						return fmt.Errorf("lock the daemon: %w", err)
					}
					release()
					if _, err := s.Search(ctx, inbox.SearchFilter{Query: "ping"}); err != nil {
						return fmt.Errorf("search: %w", err)
					}
					return nil
				}
				if err := ops(s); err != nil {
					t.Fatal(err)
				}
				victim := filepath.Join(t.TempDir(), "victim")
				os.Remove(p)
				testproc.Plant(t, plant, p, victim)

				var opsErr error
				done := make(chan struct{})
				go func() {
					defer close(done)
					s2, err := Open(ctx, db, Options{LockTimeout: 2 * time.Second})
					if err != nil {
						opsErr = err
						return
					}
					opsErr = ops(s2)
				}()
				select {
				case <-done:
				case <-time.After(30 * time.Second):
					if plant == "fifo" {
						if f, err := os.OpenFile(p, os.O_WRONLY|syscall.O_NONBLOCK, 0); err == nil {
							defer f.Close()
						}
					}
					t.Fatalf("a writer hung on the %s planted at %s", plant, p)
				}
				var e *inbox.Error
				if name == searchLockFile && opsErr == nil {
					// Search goes on without its lock (as on a store this
					// user may only read), leaving its files to the next.
				} else if !errors.As(opsErr, &e) || e.Code != "not_a_store_file" || !strings.Contains(e.Error(), p) {
					t.Errorf("the writers should refuse the planted %s, naming it (not_a_store_file): %v", plant, opsErr)
				}
				if _, err := os.Lstat(victim); !errors.Is(err, fs.ErrNotExist) {
					t.Fatalf("a file was made through the planted link: %v", err)
				}

				rep, err := s.Fsck(ctx, false)
				if err != nil {
					t.Fatal(err)
				}
				check := "planted_file"
				if plant == "symlink" {
					check = "symlink"
				}
				if !slices.ContainsFunc(rep.Findings, func(f inbox.Finding) bool { return f.Check == check && f.Path == p }) {
					t.Fatalf("fsck does not report the planted %s at %s: %+v", plant, p, rep.Findings)
				}
				type result struct {
					rep *inbox.FsckReport
					err error
				}
				fixed := make(chan result, 1)
				go func() {
					rep, err := s.Fsck(ctx, true)
					fixed <- result{rep, err}
				}()
				select {
				case res := <-fixed:
					if res.err != nil {
						t.Fatalf("fsck --repair: %v", res.err)
					}
					if !slices.ContainsFunc(res.rep.Findings, func(f inbox.Finding) bool { return f.Check == check && f.Path == p && f.Repaired }) {
						t.Fatalf("fsck --repair does not report the planted %s at %s as repaired: %+v", plant, p, res.rep.Findings)
					}
				case <-time.After(30 * time.Second):
					t.Fatalf("fsck --repair hung on the %s planted at %s", plant, p)
				}
				if rep, err := s.Fsck(ctx, false); err != nil || !rep.Clean() {
					t.Fatalf("fsck after the repair: %v %+v", err, rep)
				}
				s3, err := Open(ctx, db, Options{})
				if err != nil {
					t.Fatal(err)
				}
				if err := ops(s3); err != nil {
					t.Fatalf("after the repair: %v", err)
				}
			})
		}
	}
}

// TestPlantedFormat: a symbolic link, a FIFO or a socket planted in place
// of inbox.json hangs no one and is never read through (SPEC §8): Open
// refuses it with not_a_store_file, naming the file and the repair; a
// Store opened to recover (Options.Recover, what fsck uses) reports it as
// fsck reports any planted file, and --repair sets it aside and writes
// inbox.json anew from what the store shows (its format version, whether
// it is shared, the time of its first event), not from the link's target,
// which says otherwise and is left as it was; a Store opened before the
// file was planted writes it as it read it. Then Open works, writers work
// and fsck is clean.
func TestPlantedFormat(t *testing.T) {
	for _, shared := range []bool{false, true} {
		for _, plant := range testproc.PlantKinds {
			for _, via := range []string{"recover", "opened-before"} {
				t.Run(fmt.Sprintf("shared=%v/%s/%s", shared, plant, via), func(t *testing.T) {
					if shared {
						old := syscall.Umask(0o007) // what Init does for a shared store
						t.Cleanup(func() { syscall.Umask(old) })
					}
					db := filepath.Join(t.TempDir(), "store")
					if _, err := Init(db, shared); err != nil {
						t.Fatal(err)
					}
					ctx := t.Context()
					s := openTest(t, db)
					r, err := s.Send(ctx, inbox.SendInput{From: "a", To: "b", Subject: "s"})
					if err != nil {
						t.Fatal(err)
					}
					before, err := readFormat(db)
					if err != nil {
						t.Fatal(err)
					}
					first := r.Thread.CreatedAt // the first event's time

					// The link's target is an inbox.json that says otherwise
					// on every member a reader that followed the link would
					// take from it.
					victim := filepath.Join(t.TempDir(), "inbox.json")
					lie := fmt.Sprintf(`{"format":"inbox-store","version":1,"shared":%v,"created_at":"2001-01-01T00:00:00Z","max_blob":12345}`, !shared)
					if err := os.WriteFile(victim, []byte(lie), 0o600); err != nil {
						t.Fatal(err)
					}
					p := filepath.Join(db, formatFile)
					if err := os.Remove(p); err != nil {
						t.Fatal(err)
					}
					testproc.Plant(t, plant, p, victim)

					within := func(what string, fn func()) {
						t.Helper()
						done := make(chan struct{})
						go func() {
							defer close(done)
							fn()
						}()
						select {
						case <-done:
						case <-time.After(10 * time.Second):
							if plant == "fifo" {
								if f, err := os.OpenFile(p, os.O_WRONLY|syscall.O_NONBLOCK, 0); err == nil {
									defer f.Close()
								}
							}
							t.Fatalf("%s hung on the %s planted at %s", what, plant, p)
						}
					}
					within("Open", func() {
						_, err := Open(ctx, db, Options{})
						var e *inbox.Error
						if !errors.As(err, &e) || e.Code != "not_a_store_file" || !strings.Contains(e.Error(), p) || !strings.Contains(e.Error(), "inbox fsck --repair") {
							t.Errorf("Open should refuse the planted %s, naming it and the repair (not_a_store_file): %v", plant, err)
						}
					})
					var rs *Store
					within("Open to recover", func() {
						rs, err = Open(ctx, db, Options{Recover: true})
					})
					if err != nil {
						t.Fatalf("Open to recover: %v", err)
					}
					if _, err := rs.Send(ctx, inbox.SendInput{From: "a", To: "b", Subject: "through"}); err == nil {
						t.Fatal("a Store opened to recover wrote while inbox.json was planted")
					}
					how := "from what the store shows"
					wantFormat := formatInfo{Format: formatName, Version: FormatVersion, Shared: shared, CreatedAt: first, MaxBlob: inbox.DefaultMaxBlob}
					if via == "opened-before" {
						rs, how, wantFormat = s, "as this process read it", *before
					}
					var rep *inbox.FsckReport
					within("Fsck", func() { rep, err = rs.Fsck(ctx, false) })
					if err != nil {
						t.Fatal(err)
					}
					want := inbox.Finding{Check: "planted_file", Path: p, Detail: map[string]string{"fifo": "a FIFO", "socket": "a socket"}[plant] +
						" inside the store, where inbox only makes regular files; it is neither read nor written"}
					if plant == "symlink" {
						want = inbox.Finding{Check: "symlink", Path: p, Detail: "a symbolic link to " + victim +
							" inside the store, which inbox never makes and does not write through"}
					}
					if !slices.Contains(rep.Findings, want) || len(rep.Findings) != 1 {
						t.Fatalf("fsck should report only %+v, got %+v", want, rep.Findings)
					}
					within("Fsck --repair", func() { rep, err = rs.Fsck(ctx, true) })
					if err != nil || len(rep.Findings) != 1 || !rep.Findings[0].Repaired || rep.Findings[0].Path != p ||
						!strings.Contains(rep.Findings[0].Detail, "inbox.json written anew "+how) {
						t.Fatalf("fsck --repair should set the planted %s aside and write inbox.json anew: %v %+v", plant, err, rep)
					}
					if b, err := os.ReadFile(victim); err != nil || string(b) != lie {
						t.Fatalf("the link's target was changed: %q %v", b, err)
					}
					after, err := readFormat(db)
					if err != nil {
						t.Fatalf("inbox.json after the repair: %v", err)
					}
					if *after != wantFormat {
						t.Fatalf("inbox.json after the repair is %+v, want %+v (it was %+v)", *after, wantFormat, *before)
					}
					if fi, err := os.Lstat(p); err != nil || fi.Mode().Perm() != rs.fileMode {
						t.Fatalf("inbox.json after the repair: %v %v, want mode %v", fi, err, rs.fileMode)
					}
					if rep, err := rs.Fsck(ctx, false); err != nil || !rep.Clean() {
						t.Fatalf("fsck after the repair: %v %+v", err, rep)
					}
					s2 := openTest(t, db)
					if _, err := s2.Send(ctx, inbox.SendInput{From: "a", To: "b", Subject: "after"}); err != nil {
						t.Fatalf("send after the repair: %v", err)
					}
					if _, err := rs.Send(ctx, inbox.SendInput{From: "a", To: "b", Subject: "after, recovered"}); err != nil {
						t.Fatalf("send through the recovered Store after the repair: %v", err)
					}
					if rep, err := s2.Fsck(ctx, false); err != nil || !rep.Clean() {
						t.Fatalf("fsck at the end: %v %+v", err, rep)
					}
				})
			}
		}
	}
}

// TestPlantedLockAfterRestart: a FIFO, link or socket planted in place of
// a lock file that opening the store after the machine restarted must
// take (to replay) makes Open refuse it, naming it, without hanging; a
// Store opened to recover (fsck's) reports it and --repair sets it
// aside, after which Open replays and fsck is clean.
func TestPlantedLockAfterRestart(t *testing.T) {
	for _, plant := range testproc.PlantKinds {
		t.Run(plant, func(t *testing.T) {
			s, db := openTemp(t)
			ctx := t.Context()
			for _, subj := range []string{"one", "two"} {
				if _, err := s.Send(ctx, inbox.SendInput{From: "a", To: "b", Subject: subj}); err != nil {
					t.Fatal(err)
				}
			}
			want := views(t, s)
			crashMachine(t, db, 1)
			p := s.lockFile("idem.lock")
			os.Remove(p)
			testproc.Plant(t, plant, p, filepath.Join(t.TempDir(), "victim"))

			within := func(what string, fn func()) {
				t.Helper()
				done := make(chan struct{})
				go func() {
					defer close(done)
					fn()
				}()
				select {
				case <-done:
				case <-time.After(10 * time.Second):
					t.Fatalf("%s hung on the %s planted at %s", what, plant, p)
				}
			}
			within("Open", func() {
				_, err := Open(ctx, db, Options{})
				var e *inbox.Error
				if !errors.As(err, &e) || e.Code != "not_a_store_file" || !strings.Contains(e.Error(), p) {
					t.Errorf("Open after a restart should refuse the planted %s, naming it (not_a_store_file): %v", plant, err)
				}
			})
			var rs *Store
			var err error
			within("Open to recover", func() { rs, err = Open(ctx, db, Options{Recover: true}) })
			if err != nil {
				t.Fatalf("Open to recover: %v", err)
			}
			var rep *inbox.FsckReport
			within("Fsck", func() { rep, err = rs.Fsck(ctx, false) })
			if err != nil || !slices.ContainsFunc(rep.Findings, func(f inbox.Finding) bool { return f.Path == p }) {
				t.Fatalf("fsck should report the planted %s at %s: %v %+v", plant, p, err, rep)
			}
			within("Fsck --repair", func() { rep, err = rs.Fsck(ctx, true) })
			if err != nil || !slices.ContainsFunc(rep.Findings, func(f inbox.Finding) bool { return f.Path == p && f.Repaired }) {
				t.Fatalf("fsck --repair should set the planted %s at %s aside: %v %+v", plant, p, err, rep)
			}
			s2 := openTest(t, db) // replays
			if w, ok := s2.readWatermark(); !ok || w.BootID != bootID() {
				t.Fatalf("Open after the repair did not replay: %+v %v", w, ok)
			}
			if got := views(t, s2); !reflect.DeepEqual(got, want) {
				t.Fatalf("after the repair and replay the threads are %+v, want %+v", got, want)
			}
			if rep, err := s2.Fsck(ctx, false); err != nil || !rep.Clean() {
				t.Fatalf("fsck at the end: %v %+v", err, rep)
			}
		})
	}
}
