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

// seed002Recipes are seed 002's inbox maintenance recipes as the seed
// writes them, {team} and {member} filled in. The rotation's threshold is
// 50 KB instead of the seed's 10 MB, so that it rotates a test's inbox.
var seed002Recipes = []struct{ name, script string }{
	{"archive", `# Keep last 1000 messages, archive rest
INBOX=~/.claude/teams/alpha/members/dev/inbox
ARCHIVE=~/.claude/teams/alpha/members/dev/inbox-archive

head -n -1000 "$INBOX" >> "$ARCHIVE"
tail -n 1000 "$INBOX" > "${INBOX}.tmp"
mv "${INBOX}.tmp" "$INBOX"
`},
	{"rotate", `INBOX=~/.claude/teams/alpha/members/dev/inbox
SIZE=$(stat -c '%s' "$INBOX")

if [ $SIZE -gt 51200 ]; then  # 50KB (the seed: 10485760, 10MB)
  mv "$INBOX" "${INBOX}.$(date +%Y%m%d-%H%M%S)"
  touch "$INBOX"
fi
`},
	{"clean up", `# Delete messages older than 7 days
CUTOFF=$(date -u -d '7 days ago' +%Y-%m-%dT%H:%M:%S)

jq -r --arg cutoff "$CUTOFF" \
  'select(.timestamp > $cutoff)' \
  ~/.claude/teams/alpha/members/dev/inbox \
  > inbox.tmp
mv inbox.tmp ~/.claude/teams/alpha/members/dev/inbox
`},
}

// TestTeamDirRecipes: seed 002's archive, rotation and clean-up recipes
// run verbatim against a member inbox the daemon bridges, while the
// daemon is SIGKILLed and restarted at random. Before each recipe, seed
// 002's echo >> appends lines (half of them older than 7 days, which the
// clean-up deletes) and the CLI sends to the member. Afterwards every
// line is in the store once, no message the bridge wrote is in the files
// twice (nothing a recipe moved or removed is written back), and fsck
// finds the files and the store clean.
// needJQ makes sure jq, which seed 002's clean-up recipe runs, is on the
// PATH: installed with apt-get (Debian's package) when it is not.
func needJQ(t *testing.T) {
	t.Helper()
	if _, err := exec.LookPath("jq"); err == nil {
		return
	}
	out, err := exec.Command("sh", "-c", "apt-get install -y jq || (apt-get update && apt-get install -y jq)").CombinedOutput()
	if _, lerr := exec.LookPath("jq"); lerr != nil {
		t.Fatalf("seed 002's clean-up recipe needs jq, and apt-get could not install it: %v\n%s", err, out)
	}
}

func TestTeamDirRecipes(t *testing.T) {
	needJQ(t)
	s, db := storetest.New(t, spool.Options{})
	if _, err := s.CreateTeam(t.Context(), "lead", "alpha", []string{"coordinator", "dev"}); err != nil {
		t.Fatal(err)
	}
	home := t.TempDir()
	dir := filepath.Join(home, ".claude", "teams")
	bin := testproc.Installed(t, "inbox")
	d := &killableDaemon{t: t, bin: bin, args: []string{"daemon", "--db", db, "--team-dir", dir}}
	d.start()
	defer d.stop()
	mdir := filepath.Join(dir, "alpha", "members", "dev")
	inboxFile := filepath.Join(mdir, "inbox")
	inStore := func() map[string]int {
		items, _ := s.Mailbox(t.Context(), "dev", "coordinator")
		bodies := map[string]int{}
		for _, it := range items {
			bodies[it.Message.Body]++
		}
		return bodies
	}
	waitFor := func(what string, cond func() bool) {
		t.Helper()
		deadline := time.Now().Add(60 * time.Second)
		for !cond() {
			if time.Now().After(deadline) {
				t.Fatalf("%s: not within 60s (%d in the store)\n%s", what, len(inStore()), tail(d.logs.String(), 3000))
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	waitFor("the bridge makes the inbox", func() bool { _, err := os.Stat(inboxFile); return err == nil })
	run := func(script string) string {
		t.Helper()
		cmd := exec.Command("bash", "-c", script)
		cmd.Dir = home
		cmd.Env = append(os.Environ(), "HOME="+home)
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("%v\n%s\n%s", err, script, out)
		}
		return string(out)
	}
	stopKilling := d.killAtRandom(2, 100*time.Millisecond, 300*time.Millisecond)
	lines, sends := 0, 0
	for _, r := range seed002Recipes {
		// Seed 002's writer; 1,100 lines before the archive, which keeps
		// the last 1,000.
		n := 60
		if r.name == "archive" {
			n = 1100
		}
		run(fmt.Sprintf(`for i in $(seq %d %d); do
  if [ $((i %% 2)) = 0 ]; then TS=2026-01-15T11:15:00Z; else TS=$(date -u +%%Y-%%m-%%dT%%H:%%M:%%SZ); fi
  MESSAGE='{"type":"message","from":"coordinator","to":"dev","timestamp":"'$TS'","content":{"text":"u'$i'"}}'
  echo "$MESSAGE" >> ~/.claude/teams/alpha/members/dev/inbox
done
for i in $(seq %d %d); do %s send --db %s --from coordinator --to dev --body "s$i" >/dev/null || exit 1; done`,
			lines+1, lines+n, sends+1, sends+10, shq(bin), shq(db)))
		lines, sends = lines+n, sends+10
		start := time.Now()
		waitFor(fmt.Sprintf("all %d lines and sends in the store before the %s", lines+sends, r.name), func() bool { return len(inStore()) >= lines+sends })
		t.Logf("%s: the store had every line after %v", r.name, time.Since(start))
		run(r.script)
	}
	killed := stopKilling()
	// The last daemon has caught up once a line appended now is in the
	// store and a message sent now is in the file.
	run(`echo '{"type":"message","from":"coordinator","to":"dev","timestamp":"2026-01-15T11:15:00Z","content":{"text":"last"}}' >> ~/.claude/teams/alpha/members/dev/inbox`)
	out := run(fmt.Sprintf(`%s send --db %s --from coordinator --to dev --body last-send --json`, shq(bin), shq(db)))
	var last cliOut
	json.Unmarshal([]byte(out), &last)
	waitFor("the last line and send", func() bool {
		data, _ := os.ReadFile(inboxFile)
		return inStore()["last"] == 1 && strings.Contains(string(data), last.Message.MessageID)
	})
	d.stop()
	// The store: every line and every send once.
	bodies := inStore()
	for i := 1; i <= lines; i++ {
		if n := bodies[fmt.Sprintf("u%d", i)]; n != 1 {
			t.Errorf("line u%d is %d times in the store", i, n)
		}
	}
	for i := 1; i <= sends; i++ {
		if n := bodies[fmt.Sprintf("s%d", i)]; n != 1 {
			t.Errorf("send s%d is %d times in the store", i, n)
		}
	}
	// The files (inbox, archive, rotated): no message of the bridge's
	// twice, no line of a writer's twice.
	ids, texts := map[string]int{}, map[string]int{}
	where := map[string][]string{}
	files, _ := filepath.Glob(filepath.Join(mdir, "inbox*"))
	for _, p := range files {
		if strings.HasSuffix(p, ".lock") {
			continue
		}
		f, err := os.Open(p)
		if err != nil {
			t.Fatal(err)
		}
		dec := json.NewDecoder(f)
		for {
			var l struct {
				MessageID string `json:"messageId"`
				Content   struct {
					Text string `json:"text"`
				} `json:"content"`
			}
			if err := dec.Decode(&l); err != nil {
				break
			}
			if l.MessageID != "" {
				ids[l.MessageID]++
				where[l.MessageID] = append(where[l.MessageID], filepath.Base(p))
			} else {
				texts[l.Content.Text]++
			}
		}
		f.Close()
	}
	for id, n := range ids {
		if n > 1 {
			t.Errorf("message %s is %d times in the files (%v): written back after a recipe moved or removed it", id, n, where[id])
		}
	}
	for txt, n := range texts {
		if n > 1 {
			t.Errorf("line %q is %d times in the files", txt, n)
		}
	}
	// The kills leave what any crash leaves in the store (temp files,
	// threads begun but never committed): repair that, then the files and
	// the store agree.
	if _, err := s.Fsck(t.Context(), true); err != nil {
		t.Fatal(err)
	}
	if rep, err := s.Fsck(t.Context(), false); err != nil || len(rep.Findings) != 0 {
		t.Errorf("store fsck after repair: %+v %v", rep, err)
	}
	fsck := exec.Command(bin, "fsck", "--db", db, "--team-dir", dir)
	if out, err := fsck.CombinedOutput(); err != nil || !strings.Contains(string(out), "clean") {
		t.Errorf("fsck --team-dir after the recipes: %v\n%s", err, out)
	}
	t.Logf("%d daemon kills; %d lines, %d sends, %d of the bridge's lines in the files", killed, lines, sends, len(ids))
}
