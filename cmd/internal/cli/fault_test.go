package cli

// Fault tests with real processes (SPEC §4 exit codes, §8 invariants): a
// full disk (ENOSPC, by bytes and by inodes), a read-only store, a store
// written by a newer format version, and a store whose event log was
// deleted. Storage faults must fail with exit 50 and a clear message, lose
// nothing already acknowledged and leave the store consistent.
//
// TestFaultDiskFullEnospc, TestFaultDiskFullInodes and
// TestFaultDiskFullPageByPage fill a tmpfs (bytes, inodes, and one page at
// a time); TestFaultReadOnlyStore bind-mounts the store read-only;
// TestFaultNewerFormatVersion edits inbox.json's version;
// TestFaultEventLogDeleted removes every event-log segment.
//
// The full-disk and read-only tests need a mount of their own: they run
// every command through a shell inside a private mount namespace
// (`unshare --mount`, with `--user --map-root-user` when not root), where
// they mount a small tmpfs or a read-only bind mount that disappears with
// the shell. Each command's stdout and stderr go to files outside the
// mount, which the test reads back.

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/inbox-dev/inbox/internal/testproc"
)

// ---------------------------------------------------------------------------
// Running commands

// cmdRes is one finished command: its arguments, exit code and output.
type cmdRes struct {
	args     []string
	code     int
	out, err string
}

func (r cmdRes) String() string {
	return fmt.Sprintf("inbox %s: exit %d\nstdout: %s\nstderr: %s", strings.Join(r.args, " "),
		r.code, clip(r.out, 1500), clip(r.err, 1500))
}

func clip(s string, n int) string {
	if len(s) > n {
		return s[:n] + "…"
	}
	return s
}

// jsonMode reports whether the command was run with --json.
func (r cmdRes) jsonMode() bool {
	for _, a := range r.args {
		if a == "--json" {
			return true
		}
	}
	return false
}

// obj parses stdout as one JSON object.
func (r cmdRes) obj(t *testing.T) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal([]byte(r.out), &m); err != nil {
		t.Fatalf("stdout is not one JSON object (%v)\n%s", err, r)
	}
	return m
}

// errShape returns the error member of a failed --json response.
func (r cmdRes) errShape() (code, msg string, ok bool) {
	var m struct {
		OK    *bool `json:"ok"`
		Error struct {
			Code    string `json:"code"`
			Message string `json:"message"`
		} `json:"error"`
	}
	if err := json.Unmarshal([]byte(r.out), &m); err != nil || m.OK == nil || *m.OK {
		return "", "", false
	}
	return m.Error.Code, m.Error.Message, true
}

// message is the error text the command printed: the JSON error message
// with --json, stderr otherwise.
func (r cmdRes) message() string {
	if r.jsonMode() {
		_, msg, _ := r.errShape()
		return msg
	}
	return r.err
}

// panicked reports Go runtime crash output.
func (r cmdRes) panicked() bool {
	return strings.Contains(r.err, "panic:") || strings.Contains(r.err, "goroutine ") ||
		strings.Contains(r.out, "panic:")
}

// refusalProblem says what is wrong with a refusal (empty when nothing
// is): it must exit 50 with a message containing every one of want
// (case-insensitive), in the JSON error shape with code (if not empty)
// under --json, on stderr after "inbox: error:" otherwise; never a panic.
func refusalProblem(r cmdRes, code string, want ...string) string {
	if r.panicked() {
		return "panicked"
	}
	if r.code != 50 {
		return fmt.Sprintf("exit %d, want 50", r.code)
	}
	var probs []string
	text := r.err
	if r.jsonMode() {
		c, msg, isErr := r.errShape()
		switch {
		case !isErr:
			return "--json: stdout is not the error shape {\"ok\":false,\"error\":{…}}"
		case code != "" && c != code:
			probs = append(probs, fmt.Sprintf("--json: error code %q, want %q", c, code))
		}
		if r.err != "" {
			probs = append(probs, "--json: unexpected stderr")
		}
		text = msg
	} else if !strings.Contains(r.err, "inbox: error:") {
		probs = append(probs, "no \"inbox: error:\" line on stderr")
	}
	for _, w := range want {
		if !strings.Contains(strings.ToLower(text), strings.ToLower(w)) {
			probs = append(probs, fmt.Sprintf("the message does not mention %q", w))
		}
	}
	return strings.Join(probs, "; ")
}

// checkRefused reports a refusalProblem as a test error.
func checkRefused(t *testing.T, r cmdRes, code string, want ...string) bool {
	t.Helper()
	if p := refusalProblem(r, code, want...); p != "" {
		t.Errorf("%s\n%s", p, r)
		return false
	}
	return true
}

// runInbox runs the inbox binary directly (no namespace), with a timeout.
func runInbox(t *testing.T, inbox string, args ...string) cmdRes {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, inbox, args...)
	cmd.Env = append(os.Environ(), "INBOX_DB=", "INBOX_AGENT=")
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	r := cmdRes{args: args, out: out.String(), err: errb.String()}
	if ctx.Err() != nil {
		t.Fatalf("still running after 20 s, killed\n%s", r)
	}
	if r.code, err = exitStatus(err); err != nil {
		t.Fatalf("inbox %v: %v", args, err)
	}
	return r
}

// directRunner runs commands with runInbox.
func directRunner(t *testing.T, inbox string) faultRunner {
	return func(args ...string) cmdRes { return runInbox(t, inbox, args...) }
}

// ---------------------------------------------------------------------------
// A shell in a private mount namespace

// nsShell is a long-lived `sh` inside `unshare --mount`: the test writes a
// command to its stdin, the command's output goes to files under dir, and
// the shell answers with a marker line carrying the exit status. Mounts made
// in it are private and vanish when it exits.
type nsShell struct {
	t     *testing.T
	cmd   *exec.Cmd
	stdin io.WriteCloser
	lines chan string
	dir   string
	n     int
	errb  *syncBuffer
}

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// unshareArgs are the unshare(1) options for a private mount namespace in
// which this process may mount: as root a mount namespace is enough;
// otherwise a user namespace maps us to root in it.
func unshareArgs() []string {
	if os.Geteuid() == 0 {
		return []string{"--mount", "--propagation", "private"}
	}
	return []string{"--user", "--map-root-user", "--mount", "--propagation", "private"}
}

// startNS checks that a private mount namespace with a tmpfs can be made
// here (failing the test with what is missing otherwise) and starts a shell
// in one.
func startNS(t *testing.T) *nsShell {
	t.Helper()
	inbox := testproc.Installed(t, "inbox")
	if _, err := exec.LookPath("unshare"); err != nil {
		t.Fatalf("fault tests need unshare(1) (util-linux) on PATH to make a private mount namespace: %v", err)
	}
	if _, err := exec.LookPath("mount"); err != nil {
		t.Fatalf("fault tests need mount(8) (util-linux) on PATH: %v", err)
	}
	probe := t.TempDir()
	args := append(unshareArgs(), "sh", "-c", `mount -t tmpfs -o size=64k tmpfs "$1" && touch "$1/probe" && mount -t tmpfs -o remount,ro tmpfs "$1" && `+
		`! touch "$1/probe2" 2>/dev/null && mount --bind "$1" "$1" && mount -o remount,bind,ro "$1"`, "sh", probe)
	if out, err := exec.Command("unshare", args...).CombinedOutput(); err != nil {
		t.Fatalf("fault tests need to mount a tmpfs in a private mount namespace, and cannot here: "+
			"`unshare %s` failed: %v: %s\n(as root this needs CAP_SYS_ADMIN; unprivileged it needs user namespaces "+
			"enabled: sysctl kernel.unprivileged_userns_clone=1 / user.max_user_namespaces > 0, and no seccomp or "+
			"AppArmor policy blocking unshare/mount, e.g. kernel.apparmor_restrict_unprivileged_userns=0)",
			strings.Join(args, " "), err, out)
	}
	sh := &nsShell{t: t, dir: t.TempDir(), lines: make(chan string, 16), errb: &syncBuffer{}}
	sh.cmd = exec.Command("unshare", append(unshareArgs(), "sh", "-s")...)
	sh.cmd.Env = append(os.Environ(), "INBOX="+inbox, "INBOX_DB=", "INBOX_AGENT=", "LC_ALL=C")
	sh.cmd.Stderr = sh.errb
	var err error
	if sh.stdin, err = sh.cmd.StdinPipe(); err != nil {
		t.Fatal(err)
	}
	stdout, err := sh.cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := sh.cmd.Start(); err != nil {
		t.Fatalf("start unshare: %v", err)
	}
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			sh.lines <- sc.Text()
		}
		close(sh.lines)
	}()
	t.Cleanup(func() {
		sh.stdin.Close()
		done := make(chan struct{})
		go func() { sh.cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			sh.cmd.Process.Kill()
			<-done
		}
	})
	return sh
}

// run runs script in the namespace's shell and returns its result.
func (sh *nsShell) run(script string) cmdRes {
	sh.t.Helper()
	sh.n++
	n := sh.n
	outP := filepath.Join(sh.dir, fmt.Sprintf("%d.out", n))
	errP := filepath.Join(sh.dir, fmt.Sprintf("%d.err", n))
	fmt.Fprintf(sh.stdin, "{\n%s\n} >%s 2>%s </dev/null\necho \"@@%d $?\"\n", script, shq(outP), shq(errP), n)
	deadline := time.After(30 * time.Second)
	for {
		select {
		case line, ok := <-sh.lines:
			if !ok {
				sh.t.Fatalf("the namespace shell exited while running %q; its stderr: %s", script, sh.errb.String())
			}
			var got, code int
			if _, err := fmt.Sscanf(line, "@@%d %d", &got, &code); err != nil || got != n {
				continue
			}
			out, _ := os.ReadFile(outP)
			errb, _ := os.ReadFile(errP)
			return cmdRes{args: []string{script}, code: code, out: string(out), err: string(errb)}
		case <-deadline:
			sh.t.Fatalf("%q still running after 30 s; shell stderr: %s", script, sh.errb.String())
		}
	}
}

// must runs a shell command that has to succeed.
func (sh *nsShell) must(script string) string {
	sh.t.Helper()
	r := sh.run(script)
	if r.code != 0 {
		sh.t.Fatalf("`%s` failed: exit %d: %s%s", script, r.code, r.out, r.err)
	}
	return r.out
}

// inbox runs the inbox binary in the namespace.
func (sh *nsShell) inbox(args ...string) cmdRes {
	sh.t.Helper()
	var b strings.Builder
	b.WriteString(`"$INBOX"`)
	for _, a := range args {
		b.WriteString(" ")
		b.WriteString(shq(a))
	}
	r := sh.run(b.String())
	r.args = args
	return r
}

// ---------------------------------------------------------------------------
// Reading a store through the CLI

type msgView struct {
	MessageID string `json:"message_id"`
	ThreadID  string `json:"thread_id"`
	Seq       int    `json:"seq"`
	Kind      string `json:"kind"`
	Summary   string `json:"summary"`
	Body      string `json:"body"`
}

type threadView struct {
	Thread struct {
		ThreadID     string `json:"thread_id"`
		Status       string `json:"status"`
		AssignedTo   string `json:"assigned_to"`
		MessageCount int    `json:"message_count"`
		LastEventID  int64  `json:"last_event_id"`
	} `json:"thread"`
	Messages []msgView `json:"messages"`
}

type eventView struct {
	EventID   int64  `json:"event_id"`
	ThreadID  string `json:"thread_id"`
	EventType string `json:"event_type"`
	MessageID string `json:"message_id"`
}

type faultRunner func(args ...string) cmdRes

// setupRunner runs setup commands on the store db: it adds --db and
// --json, and fails the test unless the command exits 0.
func setupRunner(t *testing.T, run faultRunner, db string) func(args ...string) cmdRes {
	return func(args ...string) cmdRes {
		t.Helper()
		r := run(append(args, "--db", db, "--json")...)
		if r.code != 0 {
			t.Fatalf("setup:\n%s", r)
		}
		return r
	}
}

// showThread runs show --json and checks that what it prints is whole: a
// parsable thread with message_count messages of contiguous seq, none torn.
func showThread(t *testing.T, run faultRunner, db, tid string) threadView {
	t.Helper()
	r := run("show", "--db", db, "--json", "--thread", tid)
	if r.code != 0 || r.panicked() {
		t.Fatalf("show of %s must keep working:\n%s", tid, r)
	}
	var v threadView
	if err := json.Unmarshal([]byte(r.out), &v); err != nil {
		t.Fatalf("show of %s printed unparsable JSON (%v)\n%s", tid, err, r)
	}
	if v.Thread.ThreadID != tid || len(v.Messages) != v.Thread.MessageCount || v.Thread.MessageCount < 1 {
		t.Fatalf("show of %s: header says %d messages, %d shown\n%s", tid, v.Thread.MessageCount, len(v.Messages), r)
	}
	for i, m := range v.Messages {
		if m.Seq != i+1 || m.ThreadID != tid || !strings.HasPrefix(m.MessageID, "msg_") || m.Kind == "" {
			t.Fatalf("show of %s: message %d is torn or out of place: %+v", tid, i+1, m)
		}
	}
	return v
}

// allEvents runs events --json and checks ids are unique and increasing.
func allEvents(t *testing.T, run faultRunner, db string) []eventView {
	t.Helper()
	r := run("events", "--db", db, "--json")
	if r.code != 0 || r.panicked() {
		t.Fatalf("events must keep working:\n%s", r)
	}
	var v struct {
		Events []eventView `json:"events"`
	}
	if err := json.Unmarshal([]byte(r.out), &v); err != nil {
		t.Fatalf("events printed unparsable JSON (%v)\n%s", err, r)
	}
	var last int64
	for _, ev := range v.Events {
		if ev.EventID <= last {
			t.Fatalf("event id %d after %d", ev.EventID, last)
		}
		last = ev.EventID
	}
	return v.Events
}

// listThreads runs list --json over all statuses.
func listThreads(t *testing.T, run faultRunner, db string) map[string]string {
	t.Helper()
	r := run("list", "--db", db, "--json", "--limit", "10000")
	if r.code != 0 || r.panicked() {
		t.Fatalf("list must keep working:\n%s", r)
	}
	var v struct {
		Threads []struct {
			ThreadID string `json:"thread_id"`
			Status   string `json:"status"`
		} `json:"threads"`
	}
	if err := json.Unmarshal([]byte(r.out), &v); err != nil {
		t.Fatalf("list printed unparsable JSON (%v)\n%s", err, r)
	}
	m := map[string]string{}
	for _, th := range v.Threads {
		if !strings.HasPrefix(th.ThreadID, "thr_") || th.Status == "" {
			t.Fatalf("list shows a torn thread: %+v", th)
		}
		m[th.ThreadID] = th.Status
	}
	return m
}

type fsckReport struct {
	Clean    bool `json:"clean"`
	Threads  int  `json:"threads"`
	Messages int  `json:"messages"`
	Events   int  `json:"events"`
	Findings []struct {
		Check    string `json:"check"`
		ThreadID string `json:"thread_id"`
		Detail   string `json:"detail"`
		Repaired bool   `json:"repaired"`
	} `json:"findings"`
}

func runFsck(t *testing.T, run faultRunner, db string, repair bool) (cmdRes, fsckReport) {
	t.Helper()
	args := []string{"fsck", "--db", db, "--json"}
	if repair {
		args = append(args, "--repair")
	}
	r := run(args...)
	var rep fsckReport
	if r.panicked() {
		t.Fatalf("fsck panicked\n%s", r)
	}
	if r.code == 0 || r.code == 50 {
		json.Unmarshal([]byte(r.out), &rep)
	}
	return r, rep
}

func (rep fsckReport) summary() string {
	counts := map[string]int{}
	for _, f := range rep.Findings {
		k := f.Check
		if f.Repaired {
			k += " (repaired)"
		}
		counts[k]++
	}
	var parts []string
	for k, n := range counts {
		parts = append(parts, fmt.Sprintf("%s×%d", k, n))
	}
	sort.Strings(parts)
	if len(parts) == 0 {
		return "no findings"
	}
	return strings.Join(parts, ", ")
}

// mustFsckClean runs fsck (optionally --repair first) and requires exit 0.
func mustFsckClean(t *testing.T, run faultRunner, db string) fsckReport {
	t.Helper()
	r, rep := runFsck(t, run, db, false)
	if r.code != 0 || !rep.Clean {
		t.Errorf("fsck must be clean (exit 0): %s\n%s", rep.summary(), r)
	}
	return rep
}

var (
	reMsgID    = regexp.MustCompile(`msg_[0-9a-z]{26}`)
	reThreadID = regexp.MustCompile(`thr_[0-9a-z]{26}`)
)

// ids returns the thread and message ids a successful write printed, with
// or without --json.
func ids(t *testing.T, r cmdRes) (thread, msg string) {
	t.Helper()
	if r.jsonMode() {
		var v cliOut
		if err := json.Unmarshal([]byte(r.out), &v); err != nil {
			t.Fatalf("unparsable JSON after exit 0 (%v)\n%s", err, r)
		}
		return v.Thread.ThreadID, v.Message.MessageID
	}
	return reThreadID.FindString(r.out), reMsgID.FindString(r.out)
}

// ---------------------------------------------------------------------------
// 1. Full disk

// ledger is what the fill loop was told: the acknowledged writes, so they
// can be compared exactly with what the store shows, and the refused ones.
type ledger struct {
	// msgs: thread → acknowledged message id → body length.
	msgs map[string]map[string]int
	// msgEvent: acknowledged message id → the event type that must carry it.
	msgEvent map[string]string
	// counted: "thread_claimed thr_…" → acknowledged claims (no message).
	counted map[string]int
	// refused: per op kind; refusedOn: "kind thr_…" → refused count.
	refused   map[string]int
	refusedOn map[string]int
	acked     map[string]int
	ackedAt   []string // per phase: "body 32768: 7 acked, 6 refused"
}

func newLedger() *ledger {
	return &ledger{msgs: map[string]map[string]int{}, msgEvent: map[string]string{}, counted: map[string]int{},
		refused: map[string]int{}, refusedOn: map[string]int{}, acked: map[string]int{}}
}

func (l *ledger) addMsg(tid, mid string, bodyLen int, evType string) {
	if l.msgs[tid] == nil {
		l.msgs[tid] = map[string]int{}
	}
	l.msgs[tid][mid] = bodyLen
	l.msgEvent[mid] = evType
}

// verify compares the store with the ledger. Every acknowledged message
// must be in its thread exactly once, whole (its body of the right length),
// with exactly one event of the right type; every acknowledged claim must
// have its event. What the store holds beyond the ledger must be explained
// by a refused command (a change committed although the command reported
// failure); it is returned for the report. When repaired is set, every
// message must also have its event.
func (l *ledger) verify(t *testing.T, run faultRunner, db, when string, repaired bool) (extraMsgs, extraThreads int) {
	t.Helper()
	listed := listThreads(t, run, db)
	evs := allEvents(t, run, db)
	evByMsg := map[string][]eventView{}
	evCount := map[string]int{}
	for _, ev := range evs {
		if ev.MessageID != "" {
			evByMsg[ev.MessageID] = append(evByMsg[ev.MessageID], ev)
		}
		evCount[ev.EventType+" "+ev.ThreadID]++
	}
	for tid := range l.msgs {
		if _, ok := listed[tid]; !ok {
			t.Errorf("%s: acknowledged thread %s is not in list", when, tid)
		}
	}
	extraByThread := map[string]int{}
	for tid := range listed {
		v := showThread(t, run, db, tid)
		acked := l.msgs[tid]
		if acked == nil {
			extraThreads++
			t.Logf("%s: NOTE thread %s exists although no command creating it exited 0 (a refused send that committed)", when, tid)
		}
		seen := map[string]bool{}
		for _, m := range v.Messages {
			if seen[m.MessageID] {
				t.Errorf("%s: message %s appears twice in %s", when, m.MessageID, tid)
			}
			seen[m.MessageID] = true
			n, ok := acked[m.MessageID]
			if !ok {
				if acked != nil {
					extraByThread[tid]++
					extraMsgs++
				}
				if repaired && len(evByMsg[m.MessageID]) != 1 {
					t.Errorf("%s: unacknowledged message %s (seq %d of %s) has %d events after fsck --repair, want 1",
						when, m.MessageID, m.Seq, tid, len(evByMsg[m.MessageID]))
				}
				continue
			}
			if len(m.Body) != n {
				t.Errorf("%s: acknowledged message %s in %s has a body of %d bytes, want %d (torn?)", when, m.MessageID, tid, len(m.Body), n)
			}
		}
		for mid := range acked {
			if !seen[mid] {
				t.Errorf("%s: LOST: acknowledged message %s is not in thread %s (%d messages shown)", when, mid, tid, len(v.Messages))
			}
		}
	}
	for mid, typ := range l.msgEvent {
		got := evByMsg[mid]
		if len(got) != 1 || got[0].EventType != typ {
			t.Errorf("%s: acknowledged message %s has events %+v, want exactly one %s", when, mid, got, typ)
		}
	}
	for key, n := range l.counted {
		if evCount[key] < n {
			t.Errorf("%s: %d acknowledged %s, but only %d such events", when, n, key, evCount[key])
		}
	}
	// Extra messages must be explained by refused message-writing commands.
	for tid, n := range extraByThread {
		refused := l.refusedOn["reply "+tid] + l.refusedOn["update "+tid]
		if n > refused {
			t.Errorf("%s: thread %s holds %d messages nobody was told about, but only %d writes to it were refused", when, tid, n, refused)
		} else {
			t.Logf("%s: NOTE thread %s holds %d message(s) whose command exited 50 (committed, then reported as failed)", when, tid, n)
		}
	}
	if extraThreads > l.refused["send"] {
		t.Errorf("%s: %d threads nobody was told about, but only %d sends were refused", when, extraThreads, l.refused["send"])
	}
	return extraMsgs, extraThreads
}

// fillCase describes one full-disk run.
type fillCase struct {
	mountOpts  string // tmpfs options while filling
	growOpts   string // remount options that free space
	bodies     []int  // body sizes, one phase each, largest first
	want       string // what every refusal must mention
	minRefused int
}

// TestFaultDiskFullEnospc: a 384 KiB tmpfs fills up under a mix of sends
// (new threads), replies, updates, claims and renewals, with bodies of
// 32 KiB, then 4 KiB, 512 B and none, half with --json. Every refusal must
// exit 50 naming ENOSPC (code storage_error under --json); after each one
// show and list must still work and show nothing torn. Then, disk still
// full and again after growing it and fsck --repair: every acknowledged
// message is in its thread exactly once with its whole body and exactly one
// event, every acknowledged claim and renewal has its event, anything else
// the store shows is explained by a refused command, fsck is clean and new
// writes succeed.
func TestFaultDiskFullEnospc(t *testing.T) {
	faultDiskFull(t, fillCase{mountOpts: "size=384k", growOpts: "size=16m",
		bodies: []int{32 << 10, 4 << 10, 512, 0}, want: "no space left on device", minRefused: 5})
}

// TestFaultDiskFullInodes: the same with inodes running out (tmpfs
// nr_inodes) while bytes are plentiful: creating a thread directory, a
// message file, a temp file or a lock file fails with ENOSPC.
func TestFaultDiskFullInodes(t *testing.T) {
	faultDiskFull(t, fillCase{mountOpts: "size=16m,nr_inodes=96", growOpts: "nr_inodes=100000",
		bodies: []int{2 << 10, 0}, want: "no space left on device", minRefused: 5})
}

func faultDiskFull(t *testing.T, fc fillCase) {
	sh := startNS(t)
	mnt := t.TempDir()
	db := filepath.Join(mnt, "db")
	sh.must(fmt.Sprintf("mount -t tmpfs -o %s,mode=0700 tmpfs %s", fc.mountOpts, shq(mnt)))
	run := faultRunner(sh.inbox)

	if r := run("init", "--db", db); r.code != 0 {
		t.Fatalf("init on the tmpfs:\n%s", r)
	}
	t.Logf("after init: %s", strings.TrimSpace(sh.must("df -k "+shq(mnt)+" | tail -1; df -i "+shq(mnt)+" | tail -1")))
	led := newLedger()
	// Base: T collects replies; C is claimed by w and gets updates/renews.
	base := func(subject string) string {
		r := run("send", "--db", db, "--json", "--from", "boss", "--to", "w", "--subject", subject)
		if r.code != 0 {
			t.Fatalf("base send:\n%s", r)
		}
		tid, mid := ids(t, r)
		led.addMsg(tid, mid, 0, "thread_created")
		return tid
	}
	T := base("replies go here")
	C := base("claimed by w")
	if r := run("claim", "--db", db, "--json", "--agent", "w", "--thread", C, "--lease-seconds", "3600"); r.code != 0 {
		t.Fatalf("base claim:\n%s", r)
	}
	led.counted["thread_claimed "+C]++

	// Body files live outside the tmpfs.
	bodyDir := t.TempDir()
	bodyFile := map[int]string{}
	for _, n := range fc.bodies {
		if n == 0 {
			continue
		}
		p := filepath.Join(bodyDir, fmt.Sprintf("body-%d", n))
		b := bytes.Repeat([]byte("0123456789abcdef"), n/16+1)[:n]
		if err := os.WriteFile(p, b, 0o600); err != nil {
			t.Fatal(err)
		}
		bodyFile[n] = p
	}

	var unclaimed []string // acknowledged new threads, to claim later
	kinds := []string{"send", "reply", "update", "claim", "renew"}
	opNo, totalRefused, totalAcked := 0, 0, 0
	refusedMsgs := map[string]bool{} // distinct refusal messages, for the report
	for _, size := range fc.bodies {
		phaseAcked, phaseRefused, streak := 0, 0, 0
		for i := 0; streak < 6 && phaseRefused < 15 && i < 80; i++ {
			opNo++
			kind := kinds[i%len(kinds)]
			if kind == "claim" && len(unclaimed) == 0 {
				kind = "renew"
			}
			jsonMode := opNo%2 == 0
			summary := fmt.Sprintf("op %d", opNo)
			var args []string
			var tid string
			switch kind {
			case "send":
				args = []string{"send", "--from", "boss", "--to", "w", "--subject", summary}
			case "reply":
				tid = T
				args = []string{"reply", "--from", "w", "--to", "boss", "--thread", T, "--kind", "progress", "--summary", summary}
			case "update":
				tid = C
				args = []string{"update", "--agent", "w", "--thread", C, "--status", "in_progress", "--summary", summary}
			case "claim":
				tid = unclaimed[0]
				args = []string{"claim", "--agent", "w", "--thread", tid, "--lease-seconds", "3600"}
			case "renew":
				tid = C
				args = []string{"renew", "--agent", "w", "--thread", C, "--lease-seconds", "3600"}
			}
			if size > 0 && (kind == "send" || kind == "reply" || kind == "update") {
				args = append(args, "--body-file", bodyFile[size])
			}
			args = append(args, "--db", db)
			if jsonMode {
				args = append(args, "--json")
			}
			r := run(args...)
			bodyLen := 0
			if kind == "send" || kind == "reply" || kind == "update" {
				bodyLen = size
			}
			if r.code == 0 {
				streak = 0
				phaseAcked++
				led.acked[kind]++
				th, mid := ids(t, r)
				switch kind {
				case "send":
					led.addMsg(th, mid, bodyLen, "thread_created")
					unclaimed = append(unclaimed, th)
				case "reply":
					led.addMsg(T, mid, bodyLen, "message_added")
				case "update":
					led.addMsg(C, mid, bodyLen, "thread_updated")
				case "claim":
					led.counted["thread_claimed "+tid]++
					unclaimed = unclaimed[1:]
				case "renew":
					led.counted["lease_renewed "+C]++
				}
				if (kind == "send" || kind == "reply" || kind == "update") && mid == "" {
					t.Fatalf("exit 0 without a message id\n%s", r)
				}
				continue
			}
			streak++
			phaseRefused++
			led.refused[kind]++
			led.refusedOn[kind+" "+tid]++
			if checkRefused(t, r, "storage_error", fc.want) {
				msg := r.message()
				msg = reMsgID.ReplaceAllString(reThreadID.ReplaceAllString(msg, "thr_…"), "msg_…")
				msg = regexp.MustCompile(`\.[^/ ]*\d{6,}`).ReplaceAllString(msg, ".…")
				msg = regexp.MustCompile(`m-\d{8}`).ReplaceAllString(msg, "m-…")
				refusedMsgs[kind+": "+strings.TrimSpace(strings.TrimPrefix(msg, "inbox: error: "))] = true
			}
			// Readers keep working and never see anything torn.
			if tid == "" {
				tid = T
			}
			showThread(t, run, db, tid)
			listThreads(t, run, db)
			if t.Failed() {
				t.FailNow()
			}
		}
		led.ackedAt = append(led.ackedAt, fmt.Sprintf("body %d B: %d acknowledged, %d refused", size, phaseAcked, phaseRefused))
		totalAcked += phaseAcked
		totalRefused += phaseRefused
	}
	t.Logf("fill: %d writes acknowledged and %d refused (%s); acknowledged by kind %v, refused by kind %v",
		totalAcked, totalRefused, strings.Join(led.ackedAt, "; "), led.acked, led.refused)
	t.Logf("when full: %s", strings.TrimSpace(sh.must("df -k "+shq(mnt)+" | tail -1; df -i "+shq(mnt)+" | tail -1")))
	var msgs []string
	for m := range refusedMsgs {
		msgs = append(msgs, m)
	}
	sort.Strings(msgs)
	t.Logf("distinct refusals:\n  %s", strings.Join(msgs, "\n  "))
	if totalRefused < fc.minRefused {
		t.Fatalf("only %d writes refused: the disk never filled", totalRefused)
	}

	// Still full: everything acknowledged is there, readers work.
	led.verify(t, run, db, "disk full", false)
	if r := run("stats", "--db", db, "--json"); r.code != 0 {
		t.Errorf("stats while the disk is full:\n%s", r)
	}
	if r := run("fetch", "--db", db, "--json", "--agent", "w", "--status", "pending,claimed,in_progress"); r.code != 0 && r.code != 10 {
		t.Errorf("fetch while the disk is full:\n%s", r)
	}
	r, rep := runFsck(t, run, db, false)
	t.Logf("fsck while full: exit %d, %s", r.code, rep.summary())
	// A refused write leaves the store as it was: no damage, and no
	// leftovers either (each refusal undid what it had created).
	if r.code != 0 || len(rep.Findings) > 0 {
		t.Errorf("fsck while full finds leftovers of refused writes (exit %d):\n%s", r.code, r)
	}
	// An operator's first reflex, with the disk still full.
	r, rep = runFsck(t, run, db, true)
	t.Logf("fsck --repair while still full: exit %d, %s %s", r.code, rep.summary(), strings.TrimSpace(r.message()))
	if r.code != 0 {
		checkRefused(t, r, "", fc.want)
	}
	led.verify(t, run, db, "after fsck --repair on the full disk", false)

	// Free space, repair, and the store is clean and writable again.
	// "-t tmpfs … tmpfs": without them util-linux's mount re-reads the
	// options it shows (uid=…) and fails in a user namespace.
	sh.must(fmt.Sprintf("mount -t tmpfs -o remount,%s tmpfs %s", fc.growOpts, shq(mnt)))
	r, rep = runFsck(t, run, db, true)
	t.Logf("fsck --repair after freeing space: exit %d, %s", r.code, rep.summary())
	if r.code != 0 {
		t.Errorf("fsck --repair after freeing space must exit 0:\n%s", r)
	}
	mustFsckClean(t, run, db)
	extraMsgs, extraThreads := led.verify(t, run, db, "after repair", true)
	if extraMsgs > 0 || extraThreads > 0 {
		t.Errorf("refused writes (exit 50) are visible afterwards: %d messages, %d threads", extraMsgs, extraThreads)
	}

	// New writes succeed, including on the threads the refusals touched.
	after := []cmdRes{
		run("send", "--db", db, "--json", "--from", "boss", "--to", "w", "--subject", "after"),
		run("reply", "--db", db, "--json", "--from", "w", "--to", "boss", "--thread", T, "--kind", "progress", "--summary", "after"),
		run("renew", "--db", db, "--json", "--agent", "w", "--thread", C),
		run("update", "--db", db, "--json", "--agent", "w", "--thread", C, "--status", "blocked", "--summary", "after: need input"),
		run("done", "--db", db, "--json", "--agent", "w", "--thread", C, "--summary", "after: done"),
	}
	for i, r := range after {
		if r.code != 0 {
			t.Errorf("write after freeing space:\n%s", r)
			continue
		}
		th, mid := ids(t, r)
		switch i {
		case 0:
			led.addMsg(th, mid, 0, "thread_created")
		case 1:
			led.addMsg(T, mid, 0, "message_added")
		case 3:
			led.addMsg(C, mid, 0, "thread_updated")
		case 4:
			led.addMsg(C, mid, 0, "thread_done")
		}
	}
	led.verify(t, run, db, "after new writes", true)
	mustFsckClean(t, run, db)
}

// TestFaultDiskFullPageByPage: the disk is filled to the last byte with a
// filler file, then freed one page at a time; after each page, replies,
// read-cursor moves (show --mark-read) and lease renewals run until one is
// refused. So the space runs out at every step of the commit protocol in
// turn: the message file, the header line, the lease file, the cursor line
// and the event line. After each refusal the test looks at what the store
// shows; after freeing space and fsck --repair, every change the store
// shows (acknowledged or not) must have its event in the log.
func TestFaultDiskFullPageByPage(t *testing.T) {
	sh := startNS(t)
	mnt := t.TempDir()
	db := filepath.Join(mnt, "db")
	sh.must(fmt.Sprintf("mount -t tmpfs -o size=1m,mode=0700 tmpfs %s", shq(mnt)))
	run := faultRunner(sh.inbox)
	if r := run("init", "--db", db); r.code != 0 {
		t.Fatalf("init:\n%s", r)
	}
	mustOK := setupRunner(t, run, db)
	T, _ := ids(t, mustOK("send", "--from", "boss", "--to", "w", "--subject", "w reads this"))
	C, _ := ids(t, mustOK("send", "--from", "boss", "--to", "w", "--subject", "w holds this"))
	mustOK("claim", "--agent", "w", "--thread", C, "--lease-seconds", "3600")
	mustOK("show", "--thread", T, "--agent", "w", "--mark-read")

	unread := func() bool {
		r := run("fetch", "--db", db, "--json", "--agent", "w", "--unread", "--status", "pending", "--limit", "100")
		if r.code != 0 && r.code != 10 {
			t.Fatalf("fetch --unread:\n%s", r)
		}
		return strings.Contains(r.out, T)
	}
	type leaseView struct {
		Lease struct {
			ExpiresAt string `json:"expires_at"`
		} `json:"lease"`
	}
	expires := func() string {
		r := run("show", "--db", db, "--json", "--thread", C)
		var v leaseView
		if r.code != 0 || json.Unmarshal([]byte(r.out), &v) != nil {
			t.Fatalf("show:\n%s", r)
		}
		return v.Lease.ExpiresAt
	}

	filler := filepath.Join(mnt, "filler")
	sh.run(fmt.Sprintf("head -c 8388608 /dev/zero > %s", shq(filler))) // fails with ENOSPC: the disk is full
	t.Logf("filled: %s", strings.TrimSpace(sh.must("df -k "+shq(mnt)+" | tail -1")))

	var (
		acked        = map[string]int{}
		refused      = map[string]int{}
		stages       = map[string]int{} // what a refusal says it was doing
		movedRefused int                // cursor moved although show --mark-read exited 50
		moves        int                // every cursor move the store shows
		renewedRef   int                // lease extended although renew exited 50
		renews       int
		repliedRef   []string // messages present although reply exited 50
		ackedMsgs    = map[string]bool{}
	)
	stageOf := func(msg string) string {
		for _, k := range []string{"append event", "fsync event log", "thread.log", "cursor", "lease", "m-", "lock", "create thread", "index"} {
			if strings.Contains(msg, k) {
				return k
			}
		}
		return "other: " + msg
	}
	ops := []string{"reply", "mark-read", "renew"}
	opNo := 0
	for round := 0; round < 40; round++ {
		// One page, or two: the pages land on different files in turn.
		sh.must(fmt.Sprintf("truncate -s -%d %s", 4096*(1+round%2), shq(filler)))
		for i := 0; i < 12; i++ {
			op := ops[(i+round/2)%len(ops)]
			opNo++
			jsonFlag := []string{}
			if opNo%2 == 0 {
				jsonFlag = []string{"--json"}
			}
			var r cmdRes
			switch op {
			case "reply":
				before := showThread(t, run, db, T)
				r = run(append([]string{"reply", "--db", db, "--from", "boss", "--to", "w", "--thread", T, "--kind", "answer",
					"--summary", fmt.Sprintf("r%d", opNo)}, jsonFlag...)...)
				after := showThread(t, run, db, T)
				if r.code == 0 {
					_, mid := ids(t, r)
					ackedMsgs[mid] = true
				} else if len(after.Messages) > len(before.Messages) {
					repliedRef = append(repliedRef, after.Messages[len(after.Messages)-1].MessageID)
				}
			case "mark-read":
				before := unread()
				r = run(append([]string{"show", "--db", db, "--thread", T, "--agent", "w", "--mark-read"}, jsonFlag...)...)
				if moved := before && !unread(); moved {
					moves++
					if r.code != 0 {
						movedRefused++
						t.Logf("round %d: show --mark-read exited %d, but the cursor moved", round, r.code)
					}
				}
			case "renew":
				before := expires()
				r = run(append([]string{"renew", "--db", db, "--agent", "w", "--thread", C, "--lease-seconds", "3600"}, jsonFlag...)...)
				if changed := expires() != before; changed {
					renews++
					if r.code != 0 {
						renewedRef++
					}
				} else if r.code == 0 {
					renews++ // same expiry to the microsecond is not expected, but count it
				}
			}
			if r.code == 0 {
				acked[op]++
				continue
			}
			refused[op]++
			if checkRefused(t, r, "storage_error", "no space left on device") {
				stages[op+" at "+stageOf(r.message())]++
			}
			break // next page
		}
		if t.Failed() {
			t.FailNow()
		}
	}
	t.Logf("page by page: acknowledged %v, refused %v", acked, refused)
	var st []string
	for k, n := range stages {
		st = append(st, fmt.Sprintf("%s ×%d", k, n))
	}
	sort.Strings(st)
	t.Logf("where the refusals struck:\n  %s", strings.Join(st, "\n  "))
	t.Logf("refused but visible afterwards: %d replies, %d lease renewals, %d read-cursor moves", len(repliedRef), renewedRef, movedRefused)

	// Free space; repair; every change shown must have its event.
	sh.must("rm " + shq(filler))
	r, rep := runFsck(t, run, db, true)
	t.Logf("fsck --repair after freeing space: exit %d, %s", r.code, rep.summary())
	if r.code != 0 {
		t.Errorf("fsck --repair must exit 0 once there is space:\n%s", r)
	}
	mustFsckClean(t, run, db)
	evs := allEvents(t, run, db)
	byMsg := map[string]int{}
	reads, renewed := 0, 0
	for _, ev := range evs {
		byMsg[ev.MessageID]++
		switch {
		case ev.ThreadID == T && ev.EventType == "thread_read":
			reads++
		case ev.ThreadID == C && ev.EventType == "lease_renewed":
			renewed++
		}
	}
	v := showThread(t, run, db, T)
	shown := map[string]bool{}
	for _, m := range v.Messages {
		shown[m.MessageID] = true
		if byMsg[m.MessageID] < 1 {
			t.Errorf("message %s (seq %d) is in the thread but has no event after fsck --repair", m.MessageID, m.Seq)
		}
	}
	for mid := range ackedMsgs {
		if !shown[mid] {
			t.Errorf("LOST: acknowledged reply %s is not in the thread", mid)
		}
	}
	// A mark-read commits its event before its cursor line: one refused
	// while writing the cursor has its event, and fsck --repair brings
	// the cursor up to it (cursor_behind_log). No cursor move is ever
	// without its event.
	if committed := stages["mark-read at cursor"]; reads != moves+1+committed { // +1: the mark-read before the disk filled
		t.Errorf("the read cursor of w moved %d times (%d of them by a show --mark-read that exited 50) and %d mark-reads "+
			"were refused after their event, but the log holds %d thread_read events for it after fsck --repair",
			moves+1, movedRefused, committed, reads)
	}
	if renewed != renews {
		t.Errorf("the lease was extended %d times, but the log holds %d lease_renewed events after fsck --repair", renews, renewed)
	}
	// And the store is writable again.
	mustOK("reply", "--from", "boss", "--to", "w", "--thread", T, "--kind", "answer", "--summary", "after")
	mustOK("show", "--thread", T, "--agent", "w", "--mark-read")
	mustOK("done", "--agent", "w", "--thread", C, "--summary", "after")
	mustFsckClean(t, run, db)
}

// ---------------------------------------------------------------------------
// 2. Read-only store

// treeSnapshot lists every file and directory under dir with its type,
// mode, size and (for files) a hash of its contents.
func treeSnapshot(t *testing.T, dir string) []string {
	t.Helper()
	var out []string
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		fi, err := d.Info()
		if err != nil {
			return err
		}
		line := fmt.Sprintf("%s %v", rel, fi.Mode())
		if fi.Mode().IsRegular() {
			data, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			sum := sha256.Sum256(data)
			line += fmt.Sprintf(" %d %s", fi.Size(), hex.EncodeToString(sum[:8]))
		}
		out = append(out, line)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	sort.Strings(out)
	return out
}

func diffTrees(a, b []string) string {
	in := func(xs []string) map[string]bool {
		m := map[string]bool{}
		for _, x := range xs {
			m[x] = true
		}
		return m
	}
	ma, mb := in(a), in(b)
	var d []string
	for _, x := range a {
		if !mb[x] {
			d = append(d, "- "+x)
		}
	}
	for _, x := range b {
		if !ma[x] {
			d = append(d, "+ "+x)
		}
	}
	return strings.Join(d, "\n")
}

// TestFaultReadOnlyStore: the store (on the ordinary disk) is bind-mounted
// read-only onto itself in a private namespace. Every writing command
// exits 50 saying the file system is read-only; reading commands work and
// print exactly what they printed before; after the store is writable
// again, nothing has changed, fsck is clean and the refused writes succeed.
func TestFaultReadOnlyStore(t *testing.T) {
	sh := startNS(t)
	db := filepath.Join(t.TempDir(), "db")
	run := faultRunner(sh.inbox)
	if r := run("init", "--db", db); r.code != 0 {
		t.Fatalf("init:\n%s", r)
	}
	must := setupRunner(t, run, db)
	T, _ := ids(t, must("send", "--from", "boss", "--to", "w", "--subject", "being worked on", "--body", "do it"))
	U, _ := ids(t, must("send", "--from", "boss", "--to", "w", "--subject", "waiting", "--priority", "high"))
	must("claim", "--agent", "w", "--thread", T, "--lease-seconds", "3600")
	must("update", "--agent", "w", "--thread", T, "--status", "blocked", "--summary", "which database?")
	_, answer := ids(t, must("reply", "--from", "boss", "--to", "w", "--thread", T, "--kind", "answer", "--summary", "postgres"))
	must("show", "--thread", T, "--agent", "boss", "--mark-read")

	readers := [][]string{
		{"show", "--thread", T},
		{"show", "--thread", U},
		{"list"},
		{"list", "--status", "blocked"},
		{"fetch", "--agent", "w"},
		{"fetch", "--agent", "w", "--unread"},
		{"events"},
		{"events", "--thread", T},
		{"wait-reply", "--thread", T, "--after-event", "0"},
		{"watch", "--agent", "w", "--after-event", "0", "--timeout-seconds", "0"},
	}
	readAll := func(jsonMode bool) map[string]cmdRes {
		m := map[string]cmdRes{}
		for _, a := range readers {
			args := append(append([]string{}, a...), "--db", db)
			if jsonMode {
				args = append(args, "--json")
			}
			m[strings.Join(a, " ")] = run(args...)
		}
		return m
	}
	beforeJSON, beforeHuman := readAll(true), readAll(false)
	snap := treeSnapshot(t, db)
	mustFsckClean(t, run, db)

	sh.must(fmt.Sprintf("mount --bind %s %s && mount -o remount,bind,ro %s", shq(db), shq(db), shq(db)))
	if r := sh.run("touch " + shq(filepath.Join(db, "probe"))); r.code == 0 {
		t.Fatalf("the bind mount is not read-only")
	}

	writers := [][]string{
		{"send", "--from", "boss", "--to", "w", "--subject", "new"},
		{"send", "--from", "boss", "--thread", T, "--kind", "control", "--summary", "more"},
		{"reply", "--from", "boss", "--to", "w", "--thread", T, "--kind", "answer", "--summary", "again"},
		{"claim", "--agent", "w2", "--thread", U},
		{"claim", "--agent", "w", "--thread", T},
		{"renew", "--agent", "w", "--thread", T},
		{"update", "--agent", "w", "--thread", T, "--status", "in_progress", "--summary", "on it"},
		{"done", "--agent", "w", "--thread", T, "--summary", "finished"},
		{"fail", "--agent", "w", "--thread", T, "--summary", "gave up"},
		{"cancel", "--agent", "boss", "--thread", U, "--reason", "not needed"},
		{"show", "--thread", T, "--agent", "w", "--mark-read"},
		{"fsck", "--repair"},
		{"reindex"},
		{"archive", "--older-than", "0s"},
	}
	refusals := 0
	for _, a := range writers {
		for _, jsonMode := range []bool{true, false} {
			args := append(append([]string{}, a...), "--db", db)
			if jsonMode {
				args = append(args, "--json")
			}
			r := run(args...)
			if checkRefused(t, r, "storage_error", "read-only file system") {
				refusals++
			}
		}
	}
	t.Logf("%d of %d writing commands refused with exit 50 and \"read-only file system\"", refusals, 2*len(writers))

	// Readers work and print what they printed before.
	for jsonMode, before := range map[bool]map[string]cmdRes{true: beforeJSON, false: beforeHuman} {
		now := readAll(jsonMode)
		for k, b := range before {
			r := now[k]
			if r.code != b.code || r.out != b.out {
				t.Errorf("read-only: %q (json %v) changed:\nbefore: %s\nnow: %s", k, jsonMode, b, r)
			}
		}
	}
	if r := run("wait-reply", "--db", db, "--json", "--thread", T, "--after-event", "0"); !strings.Contains(r.out, answer) {
		t.Errorf("wait-reply on the read-only store does not return the answer %s:\n%s", answer, r)
	}
	for _, a := range [][]string{{"stats"}, {"stats", "--json"}, {"fsck"}, {"fsck", "--json"}, {"init"}, {"init", "--json"}} {
		if r := run(append(a, "--db", db)...); r.code != 0 || r.panicked() {
			t.Errorf("read-only: %v must work:\n%s", a, r)
		}
	}

	sh.must("umount " + shq(db))
	if after := treeSnapshot(t, db); diffTrees(snap, after) != "" {
		t.Errorf("the store changed while read-only:\n%s", diffTrees(snap, after))
	}
	mustFsckClean(t, run, db)
	for k, b := range beforeJSON {
		if strings.HasPrefix(k, "show") || strings.HasPrefix(k, "events") {
			if r := run(append(strings.Fields(k), "--db", db, "--json")...); r.out != b.out {
				t.Errorf("after remounting read-write, %q changed:\nbefore: %s\nnow: %s", k, b, r)
			}
		}
	}
	// The refused writes succeed now.
	must("claim", "--agent", "w2", "--thread", U)
	must("update", "--agent", "w", "--thread", T, "--status", "in_progress", "--summary", "on it")
	must("done", "--agent", "w", "--thread", T, "--summary", "finished")
	must("send", "--from", "boss", "--to", "w", "--subject", "new")
	must("show", "--thread", T, "--agent", "w", "--mark-read")
	mustFsckClean(t, run, db)
}

// ---------------------------------------------------------------------------
// 3. Newer format

// faultStore makes a store with a little of everything in it, directly on
// disk: T claimed by w with a reply, U pending.
func faultStore(t *testing.T, inbox string) (db, T, U string) {
	t.Helper()
	db = filepath.Join(t.TempDir(), "db")
	must := setupRunner(t, directRunner(t, inbox), db)
	must("init")
	T, _ = ids(t, must("send", "--from", "boss", "--to", "w", "--subject", "being worked on"))
	U, _ = ids(t, must("send", "--from", "boss", "--to", "w", "--subject", "waiting"))
	must("claim", "--agent", "w", "--thread", T)
	must("reply", "--from", "boss", "--to", "w", "--thread", T, "--kind", "answer", "--summary", "hint")
	return db, T, U
}

// everyCommand is one invocation of each command on a store with threads
// T (claimed by w) and U (pending).
func everyCommand(T, U string) [][]string {
	return [][]string{
		{"init"},
		{"send", "--from", "boss", "--to", "w", "--subject", "new"},
		{"send", "--from", "boss", "--thread", T, "--kind", "control", "--summary", "more"},
		{"reply", "--from", "boss", "--to", "w", "--thread", T, "--kind", "answer", "--summary", "again"},
		{"fetch", "--agent", "w"},
		{"claim", "--agent", "w2", "--thread", U},
		{"renew", "--agent", "w", "--thread", T},
		{"update", "--agent", "w", "--thread", T, "--status", "in_progress", "--summary", "on it"},
		{"done", "--agent", "w", "--thread", T, "--summary", "finished"},
		{"fail", "--agent", "w", "--thread", T, "--summary", "gave up"},
		{"cancel", "--agent", "boss", "--thread", U, "--reason", "not needed"},
		{"list"},
		{"show", "--thread", T},
		{"show", "--thread", T, "--agent", "w", "--mark-read"},
		{"watch", "--agent", "w", "--timeout-seconds", "1"},
		{"wait-reply", "--thread", T, "--timeout-seconds", "1"},
		{"events"},
		{"fsck"},
		{"fsck", "--repair"},
		{"reindex"},
		{"archive", "--older-than", "0s"},
		{"stats"},
	}
}

// TestFaultNewerFormatVersion: inbox.json says version 2, 99, or a version
// that is not a number. Every command (the daemon too) exits 50 with a
// message naming the version and saying to upgrade, and the store is left
// byte for byte as it was.
func TestFaultNewerFormatVersion(t *testing.T) {
	inbox := testproc.Installed(t, "inbox")
	db, T, U := faultStore(t, inbox)
	format := filepath.Join(db, "inbox.json")
	orig, err := os.ReadFile(format)
	if err != nil {
		t.Fatal(err)
	}
	reVersion := regexp.MustCompile(`"version":\s*2\b`)
	if !reVersion.Match(orig) {
		t.Fatalf("inbox.json has no \"version\":2: %s", orig)
	}
	for _, tc := range []struct {
		name, value string
		want        []string // the message must mention each
	}{
		{"3", "3", []string{"version 3", "upgrade"}},
		{"99", "99", []string{"version 99", "upgrade"}},
		{"string", `"2.0-beta"`, []string{"version", "2.0-beta"}},
		{"fraction", `1.5`, []string{"version", "1.5"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			edited := reVersion.ReplaceAll(orig, []byte(`"version":`+tc.value))
			if err := os.WriteFile(format, edited, 0o600); err != nil {
				t.Fatal(err)
			}
			defer os.WriteFile(format, orig, 0o600)
			snap := treeSnapshot(t, db)
			refused := 0
			problems := map[string][]string{} // problem and message → commands
			var example string
			check := func(r cmdRes, code string) {
				if p := refusalProblem(r, code, tc.want...); p != "" {
					k := p + "\n    message: " + strings.TrimSpace(r.message())
					problems[k] = append(problems[k], strings.Join(r.args[:1], " "))
					example = r.String()
				} else {
					refused++
				}
			}
			for _, a := range everyCommand(T, U) {
				for _, jsonMode := range []bool{true, false} {
					args := append(append([]string{}, a...), "--db", db)
					if jsonMode {
						args = append(args, "--json")
					}
					check(runInbox(t, inbox, args...), "unsupported_format")
				}
			}
			// The daemon must refuse too, at once, and create nothing.
			check(runInbox(t, inbox, "daemon", "--db", db), "")
			t.Logf("version %s: %d invocations refused as required; message: %q", tc.value, refused,
				strings.TrimSpace(runInbox(t, inbox, "list", "--db", db).err))
			for p, cmds := range problems {
				t.Errorf("version %s: %d invocations (%s): %s", tc.value, len(cmds), strings.Join(uniq(cmds), " "), p)
			}
			if example != "" {
				t.Logf("for example:\n%s", example)
			}
			if d := diffTrees(snap, treeSnapshot(t, db)); d != "" {
				t.Errorf("the store changed although every command was refused:\n%s", d)
			}
		})
	}
	// Back to version 1: the store is intact.
	if err := os.WriteFile(format, orig, 0o600); err != nil {
		t.Fatal(err)
	}
	if r := runInbox(t, inbox, "fsck", "--db", db); r.code != 0 {
		t.Errorf("fsck after restoring version 1:\n%s", r)
	}
	if r := runInbox(t, inbox, "show", "--db", db, "--thread", T, "--json"); r.code != 0 || strings.Count(r.out, `"message_id"`) != 2 {
		t.Errorf("show after restoring version 1:\n%s", r)
	}
}

// ---------------------------------------------------------------------------
// 4. Deleted event log

// TestFaultEventLogDeleted: every events/*.jsonl segment is deleted. No
// command may panic; each either works (the readers that do not need the
// log) or exits 50 with a message pointing at fsck, changing nothing; and
// fsck --repair must be the way out it is advertised as: afterwards fsck
// is clean and writes work, with event ids that never go back below ones
// already handed out.
func TestFaultEventLogDeleted(t *testing.T) {
	inbox := testproc.Installed(t, "inbox")
	db, T, U := faultStore(t, inbox)
	var lastID int64
	{
		r := runInbox(t, inbox, "events", "--db", db, "--json")
		var v struct {
			Next int64 `json:"next_event_id"`
		}
		json.Unmarshal([]byte(r.out), &v)
		lastID = v.Next // the last event id: where to continue from
		if lastID < 4 {
			t.Fatalf("setup left %d events:\n%s", lastID, r)
		}
	}
	segs, _ := filepath.Glob(filepath.Join(db, "events", "*.jsonl"))
	if len(segs) == 0 {
		t.Fatal("no event-log segment to delete")
	}
	for _, p := range segs {
		if err := os.Remove(p); err != nil {
			t.Fatal(err)
		}
	}
	snap := treeSnapshot(t, db)
	var worked, refused []string
	for _, a := range everyCommand(T, U) {
		if a[0] == "fsck" {
			continue // below: fsck reports the missing log as a finding
		}
		for _, jsonMode := range []bool{true, false} {
			args := append(append([]string{}, a...), "--db", db)
			if jsonMode {
				args = append(args, "--json")
			}
			r := runInbox(t, inbox, args...)
			switch {
			case r.panicked():
				t.Errorf("panicked:\n%s", r)
			case r.code == 0:
				worked = append(worked, strings.Join(a[:1], " "))
			case checkRefused(t, r, "", "fsck"):
				refused = append(refused, a[0])
			}
		}
		if d := diffTrees(snap, treeSnapshot(t, db)); d != "" {
			// Lock files are made on demand and never removed (by design);
			// empty directories are debris fsck reports; a file that
			// changed is state a refused command must not have changed.
			var files, dirs []string
			for _, line := range strings.Split(d, "\n") {
				switch {
				case strings.Contains(line, "locks/"):
				case strings.Contains(line, " d"):
					dirs = append(dirs, line)
				default:
					files = append(files, line)
				}
			}
			if len(files) > 0 {
				t.Errorf("%v, refused or not, changed state in the store while its event log is missing "+
					"(the change has no event, and fsck cannot tell):\n%s", a, strings.Join(files, "\n"))
			}
			if len(dirs) > 0 {
				t.Logf("NOTE %v left empty directories behind:\n%s", a, strings.Join(dirs, "\n"))
			}
			snap = treeSnapshot(t, db)
		}
	}
	t.Logf("with no event log: worked (exit 0): %v; refused (exit 50, mentioning fsck): %v", uniq(worked), uniq(refused))
	if r := runInbox(t, inbox, "send", "--db", db, "--from", "boss", "--to", "w", "--subject", "x"); r.code == 0 {
		t.Errorf("a write without an event log must be refused:\n%s", r)
	}

	r := runInbox(t, inbox, "fsck", "--db", db)
	t.Logf("fsck: exit %d: %s%s", r.code, r.out, r.err)
	if r.code != 50 || r.panicked() || !strings.Contains(r.out, "missing_event_log") || !strings.Contains(r.out, "fsck --repair") {
		t.Errorf("fsck of a store without an event log must exit 50, report missing_event_log and point at fsck --repair:\n%s", r)
	}
	r = runInbox(t, inbox, "fsck", "--repair", "--db", db)
	t.Logf("fsck --repair: exit %d: %s%s", r.code, r.out, r.err)
	if r.panicked() {
		t.Fatalf("fsck --repair panicked:\n%s", r)
	}
	if r.code != 0 {
		msg := r.out + r.err
		if strings.Contains(msg, "run inbox fsck --repair") {
			t.Fatalf("fsck --repair fails and tells the user to run fsck --repair: a dead end with no way back "+
				"to a working store (the thread files are intact; a repair could start a new segment after the "+
				"highest event id the headers name)\n%s", r)
		}
		if !checkRefused(t, r, "", "event") {
			t.Fatalf("fsck --repair refused without saying why")
		}
		t.Logf("fsck --repair refuses to repair a store without an event log: %s", strings.TrimSpace(msg))
		return
	}
	mustFsckClean(t, directRunner(t, inbox), db)
	r = runInbox(t, inbox, "send", "--db", db, "--json", "--from", "boss", "--to", "w", "--subject", "after repair")
	if r.code != 0 {
		t.Fatalf("send after fsck --repair:\n%s", r)
	}
	var v struct {
		Thread struct {
			LastEventID int64 `json:"last_event_id"`
		} `json:"thread"`
	}
	json.Unmarshal([]byte(r.out), &v)
	if v.Thread.LastEventID <= lastID {
		t.Errorf("after repair the log hands out event id %d again (ids up to %d were used before the log was deleted)",
			v.Thread.LastEventID, lastID-1)
	}
	for _, tid := range []string{T, U} {
		if r := runInbox(t, inbox, "show", "--db", db, "--thread", tid); r.code != 0 {
			t.Errorf("show after repair:\n%s", r)
		}
	}
}

func uniq(xs []string) []string {
	seen := map[string]bool{}
	var out []string
	for _, x := range xs {
		if !seen[x] {
			seen[x] = true
			out = append(out, x)
		}
	}
	return out
}
