package cli

import (
	"bufio"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/inbox-dev/inbox"
	"github.com/inbox-dev/inbox/internal/storetest"
	"github.com/inbox-dev/inbox/internal/testproc"
	"github.com/inbox-dev/inbox/spool"
)

// killableDaemon runs `inbox daemon ARGS` and restarts it after each kill.
type killableDaemon struct {
	t    *testing.T
	bin  string
	args []string
	mu   sync.Mutex
	cmd  *exec.Cmd
	logs strings.Builder
}

func (d *killableDaemon) start() {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.cmd = exec.Command(d.bin, d.args...)
	d.cmd.Stderr = &d.logs
	if err := d.cmd.Start(); err != nil {
		d.t.Fatal(err)
	}
}

// kill SIGKILLs the daemon and waits for it.
func (d *killableDaemon) kill() { d.end(syscall.SIGKILL) }

// stop ends the daemon cleanly.
func (d *killableDaemon) stop() { d.end(syscall.SIGINT) }

// end sends the running daemon, if any, sig and waits for it.
func (d *killableDaemon) end(sig syscall.Signal) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.cmd != nil {
		d.cmd.Process.Signal(sig)
		d.cmd.Wait()
		d.cmd = nil
	}
}

// killAtRandom SIGKILLs the daemon and starts it again, over and over,
// every least+rand(spread) (the random source seeded with seed), until
// the function it returns is called; that one returns how many kills
// there were.
func (d *killableDaemon) killAtRandom(seed uint64, least, spread time.Duration) (stop func() int) {
	done := make(chan struct{})
	killed := make(chan int)
	go func() {
		r := rand.New(rand.NewPCG(seed, seed+1))
		n := 0
		for {
			select {
			case <-done:
				killed <- n
				return
			case <-time.After(least + time.Duration(r.Int64N(int64(spread)))):
			}
			d.kill()
			n++
			d.start()
		}
	}()
	return func() int {
		close(done)
		return <-killed
	}
}

// wantEachOnce counts the bodies of items and fails t unless each of the
// writers' entries w<W>-<I> (I from 1 to each) is there exactly once (what
// names an entry in the message).
func wantEachOnce(t *testing.T, items []*inbox.MailItem, what string, writers, each int) {
	t.Helper()
	bodies := map[string]int{}
	for _, it := range items {
		bodies[it.Message.Body]++
	}
	for w := range writers {
		for i := 1; i <= each; i++ {
			if n := bodies[fmt.Sprintf("w%d-%d", w, i)]; n != 1 {
				t.Fatalf("%s w%d-%d is %d times in the store", what, w, i, n)
			}
		}
	}
}

// TestTeamDirProcesses: 4 shell writers append seed 002 lines to a member's
// inbox (two with plain `echo >>`, two under `flock` on inbox.lock) while
// the CLI sends to the same member and the daemon bridging the file is
// SIGKILLed and restarted at random. 250 messages in all (1,000 in the
// long run): afterwards the store holds every line exactly once, the file
// every send exactly once, nothing written back, and fsck --repair leaves
// a clean store.
func TestTeamDirProcesses(t *testing.T) {
	writers, each, sends := 4, 50, 50
	if testproc.Long {
		each, sends = 200, 200
	}
	s, db := storetest.New(t, spool.Options{})
	if _, err := s.CreateTeam(t.Context(), "lead", "alpha", []string{"coordinator", "dev"}); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	bin := testproc.Installed(t, "inbox")
	d := &killableDaemon{t: t, bin: bin, args: []string{"daemon", "--db", db, "--team-dir", dir}}
	d.start()
	defer d.stop()
	mdir := filepath.Join(dir, "alpha", "members", "dev")
	inboxFile := filepath.Join(mdir, "inbox")
	deadline := time.Now().Add(10 * time.Second)
	for _, err := os.Stat(inboxFile); err != nil; _, err = os.Stat(inboxFile) {
		if time.Now().After(deadline) {
			t.Fatalf("the bridge made no inbox: %s", d.logs.String())
		}
		time.Sleep(10 * time.Millisecond)
	}
	var cmds []*exec.Cmd
	for w := range writers {
		line := fmt.Sprintf(`{"type":"message","from":"coordinator","to":"dev","timestamp":"2026-02-15T11:15:00Z","content":{"text":"w%d-$i"}}`, w)
		line = strings.ReplaceAll(line, `"`, `\"`)
		app := fmt.Sprintf(`echo "%s" >> %s`, line, shq(inboxFile))
		if w%2 == 1 {
			app = fmt.Sprintf(`{ flock -x 200; %s; } 200>%s`, app, shq(filepath.Join(mdir, "inbox.lock")))
		}
		cmds = append(cmds, exec.Command("bash", "-c", fmt.Sprintf("for i in $(seq %d); do %s; sleep 0.01; done", each, app)))
	}
	cmds = append(cmds, exec.Command("bash", "-c", fmt.Sprintf(`for i in $(seq %d); do %s send --db %s --from coordinator --to dev --body "s$i" --json || exit 1; done`,
		sends, shq(bin), shq(db))))
	// The killer: SIGKILL the daemon every 50–200 ms and start it again.
	stopKilling := d.killAtRandom(1, 50*time.Millisecond, 150*time.Millisecond)
	outs := runConcurrently(t, cmds)
	killed := stopKilling()
	for i, o := range outs {
		if o.err != nil {
			t.Fatalf("writer %d: %v\n%s", i, o.err, o.stderr.String())
		}
	}
	var sent []string
	for _, l := range strings.Split(strings.TrimSpace(outs[writers].stdout.String()), "\n") {
		var o cliOut
		if err := json.Unmarshal([]byte(l), &o); err != nil {
			t.Fatal(err)
		}
		sent = append(sent, o.Message.MessageID)
	}
	// Let the last daemon catch up.
	want := writers * each
	deadline = time.Now().Add(30 * time.Second)
	var items []*inbox.MailItem
	for {
		items, _ = s.Mailbox(t.Context(), "dev", "coordinator")
		fileLines := countLines(t, inboxFile)
		if len(items) >= want+sends && fileLines >= want+sends {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("after %d kills: %d messages in the store, %d lines in the file; want %d each\n%s",
				killed, len(items), fileLines, want+sends, tail(d.logs.String(), 3000))
		}
		time.Sleep(50 * time.Millisecond)
	}
	d.stop()
	// The store: every foreign line once, every send once.
	wantEachOnce(t, items, "line", writers, each)
	// The file: every line once, every send once, nothing written back.
	f, err := os.Open(inboxFile)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	ids, texts := map[string]int{}, map[string]int{}
	var lastEvent int64
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		var l struct {
			MessageID string `json:"messageId"`
			Content   struct {
				Text string `json:"text"`
			} `json:"content"`
		}
		if err := json.Unmarshal(sc.Bytes(), &l); err != nil {
			t.Fatalf("a torn or bad line in the file: %q", sc.Text())
		}
		if l.MessageID != "" {
			ids[l.MessageID]++
			// The bridge's lines follow the event order.
			th, _, err := s.LastMessage(t.Context(), threadOf(t, s, l.MessageID, items))
			if err == nil && th.LastEventID < lastEvent {
				t.Errorf("message %s is out of event order in the file", l.MessageID)
			}
			if err == nil {
				lastEvent = th.LastEventID
			}
		} else {
			texts[l.Content.Text]++
		}
	}
	for _, id := range sent {
		if ids[id] != 1 {
			t.Fatalf("send %s is %d times in the file", id, ids[id])
		}
	}
	if len(ids) != sends {
		t.Fatalf("%d of the bridge's lines in the file, want %d (a line taken in was written back?)", len(ids), sends)
	}
	for txt, n := range texts {
		if n != 1 {
			t.Fatalf("foreign line %q is %d times in the file", txt, n)
		}
	}
	// The kills leave what any crash leaves (temp files, threads begun but
	// never committed): repair, then the store is clean and still holds
	// every message.
	if _, err := s.Fsck(t.Context(), true); err != nil {
		t.Fatal(err)
	}
	if rep, err := s.Fsck(t.Context(), false); err != nil || len(rep.Findings) != 0 {
		t.Fatalf("fsck after repair: %+v %v", rep, err)
	}
	if after, _ := s.Mailbox(t.Context(), "dev", "coordinator"); len(after) != len(items) {
		t.Fatalf("repair changed dev's mailbox: %d messages, was %d", len(after), len(items))
	}
	t.Logf("%d daemon kills; %d lines taken in and %d sends written out, each once", killed, want, sends)
}

func countLines(t *testing.T, p string) int {
	data, err := os.ReadFile(p)
	if err != nil {
		return 0
	}
	return strings.Count(string(data), "\n")
}

func threadOf(t *testing.T, s *spool.Store, mid string, items []*inbox.MailItem) string {
	for _, it := range items {
		if it.Message.MessageID == mid {
			return it.Message.ThreadID
		}
	}
	return ""
}

func tail(s string, n int) string {
	if len(s) > n {
		return s[len(s)-n:]
	}
	return s
}
