package spool

import (
	"os"
	"path/filepath"
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
