package cli

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/rogpeppe/go-internal/testscript"

	"github.com/inbox-dev/inbox"
	"github.com/inbox-dev/inbox/internal/migrate"
	"github.com/inbox-dev/inbox/internal/natstest"
	"github.com/inbox-dev/inbox/internal/testproc"
	"github.com/inbox-dev/inbox/natsbus"
)

// The CLI scripts on the NATS backend. With INBOX_TEST_NATS set to a
// server's URL, the "inbox" a script runs is inbox-nats, and every
// directory store it names (--db DIR, INBOX_DB=DIR) is a NATS store of
// that server, one per directory: the same script, the other backend.

// natsForTests switches this process to the NATS backend when a script
// asks for it (see above).
func natsForTests() {
	server := os.Getenv("INBOX_TEST_NATS")
	if server == "" {
		return
	}
	MigrateToNATS = migrate.ToNATS
	MigrateFromNATS = migrate.ToDir
	OpenNATS = func(ctx context.Context, db string, create bool, source string) (inbox.Bus, bool, error) {
		b, err := natsbus.Open(ctx, db, natsbus.Options{Create: create, Source: source})
		if err != nil {
			return nil, false, err
		}
		return b, b.Created(), nil
	}
	mapped := func(dir string) string {
		if dir == "" || strings.Contains(dir, "://") || os.Getenv("INBOX_TEST_DIRS") != "" {
			return dir
		}
		abs, _ := filepath.Abs(dir)
		return natsStoreFor(server, abs)
	}
	// A directory store's intake is <db>/intake: the daemon of the
	// mapped store is given that directory, as --intake (a NATS store
	// has none of its own).
	dbDir := os.Getenv("INBOX_DB")
	for i := 1; i+1 < len(os.Args); i++ {
		if os.Args[i] == "--db" {
			dbDir = os.Args[i+1]
		} else if v, ok := strings.CutPrefix(os.Args[i], "--db="); ok {
			dbDir = v
		}
	}
	if dbDir == "" {
		dbDir = defaultDB
	}
	if len(os.Args) > 1 && os.Args[1] == "daemon" && !slices.ContainsFunc(os.Args, func(a string) bool { return strings.HasPrefix(a, "--intake") && !strings.HasPrefix(a, "--intake-to") }) &&
		!strings.Contains(dbDir, "://") && os.Getenv("INBOX_TEST_DIRS") == "" {
		os.MkdirAll(filepath.Join(dbDir, "intake"), 0o700)
		os.Args = append(os.Args, "--intake", filepath.Join(dbDir, "intake"))
	}
	if os.Args[1] == "init" && !strings.Contains(dbDir, "://") && os.Getenv("INBOX_TEST_DIRS") == "" {
		os.MkdirAll(filepath.Join(dbDir, "intake"), 0o700)
	}
	if db := os.Getenv("INBOX_DB"); db != "" {
		os.Setenv("INBOX_DB", mapped(db))
	}
	for i := 1; i < len(os.Args); i++ {
		switch a := os.Args[i]; {
		case a == "--db" && i+1 < len(os.Args):
			os.Args[i+1] = mapped(os.Args[i+1])
			i++
		case strings.HasPrefix(a, "--db="):
			os.Args[i] = "--db=" + mapped(strings.TrimPrefix(a, "--db="))
		}
	}
}

// natsScripts are the scripts of testdata/script that run on both
// backends (INBOX_NATS_SCRIPTS=all runs every one, to see which could
// join). The others look at the directory itself: its files, fsck's
// findings about them, damage and repair, archive's directories and
// segments, the 64 MiB inline limit (NATS's is 512 KB), file times as
// activity, a missing or symlinked store directory, the store path in
// output or in a task's environment.
var natsScripts = []string{
	"intake_strict.txtar",
	"agents_unknown_recipient.txtar",
	"archive_idempotency.txtar",
	"archive_retry.txtar",
	"archive_terminal.txtar",
	"cancel_idempotency.txtar",
	"cancel_thread.txtar",
	"claim_concurrent.txtar",
	"claim_conflict.txtar",
	"claim_lease.txtar",
	"daemon_backlog.txtar",
	"daemon_burst.txtar",
	"daemon_crash_exactly_once.txtar",
	"daemon_intake_dir.txtar",
	"daemon_intake_flags.txtar",
	"daemon_intake_replaced.txtar",
	"daemon_lease_expiry.txtar",
	"daemon_lifecycle.txtar",
	"daemon_long_names.txtar",
	"daemon_malformed_young.txtar",
	"daemon_outcome.txtar",
	"daemon_outcome_catchup.txtar",
	"daemon_outcome_shared_thread.txtar",
	"daemon_pickup.txtar",
	"daemon_prompt.txtar",
	"daemon_refusal_message_kind.txtar",
	"daemon_refusals.txtar",
	"daemon_same_name.txtar",
	"daemon_send.txtar",
	"daemon_signals.txtar",
	"daemon_single.txtar",
	"daemon_spawn_worker.txtar",
	"daemon_stop_midburst.txtar",
	"daemon_team_files.txtar",
	"done_idempotency.txtar",
	"done_result.txtar",
	"events_concurrent.txtar",
	"events_errors.txtar",
	"events_filters.txtar",
	"events_follow.txtar",
	"events_log.txtar",
	"fail_idempotency.txtar",
	"fail_result.txtar",
	"fetch_ordering.txtar",
	"fetch_unread.txtar",
	"fsck_clean.txtar",
	"help_usage.txtar",
	"hook_context_cap.txtar",
	"hook_events.txtar",
	"lease_expired.txtar",
	"lease_expired_fetch.txtar",
	"lease_token_after_daemon_expiry.txtar",
	"lease_token_stale.txtar",
	"list_filters.txtar",
	"mail_not_work.txtar",
	"mailbox_async_check.txtar",
	"mailbox_collected_in_thread.txtar",
	"mailbox_concurrent_receive.txtar",
	"mailbox_from_order.txtar",
	"mailbox_lifo.txtar",
	"mailbox_parallel.txtar",
	"mailbox_peek_check.txtar",
	"mailbox_priority.txtar",
	"mailbox_progress.txtar",
	"mailbox_sequential.txtar",
	"mailbox_siblings.txtar",
	"mcp_command.txtar",
	"queue_batched.txtar",
	"queue_cancel.txtar",
	"queue_failure.txtar",
	"queue_ownership.txtar",
	"queue_prompt_not_mail.txtar",
	"queue_push_errors.txtar",
	"queue_run_errors.txtar",
	"queue_progress_thread.txtar",
	"queue_run_once.txtar",
	"queue_seed_syntax.txtar",
	"queue_run_timeout.txtar",
	"queue_states.txtar",
	"queue_subagent_push.txtar",
	"queue_timeout.txtar",
	"queue_timeout_escaped.txtar",
	"renew_lease.txtar",
	"reply_idempotency.txtar",
	"reply_thread.txtar",
	"send_artifacts.txtar",
	"send_concurrent.txtar",
	"send_errors.txtar",
	"send_idempotency.txtar",
	"send_idempotency_race.txtar",
	"send_thread.txtar",
	"send_thread_flags.txtar",
	"show_transcript.txtar",
	"skill_print.txtar",
	"team_ack.txtar",
	"team_addressing.txtar",
	"team_commands.txtar",
	"team_idle.txtar",
	"team_request.txtar",
	"team_typed.txtar",
	"terminal_transitions.txtar",
	"testscript_exits.txtar",
	"update_idempotency.txtar",
	"update_status.txtar",
	"wait-reply_agent_cursor.txtar",
	"wait-reply_blocking.txtar",
	"wait-reply_cancel.txtar",
	"wait-reply_cursor.txtar",
	"wait-reply_done.txtar",
	"wait-reply_errors.txtar",
	"wait-reply_existing.txtar",
	"wait-reply_human.txtar",
	"wait-reply_kinds.txtar",
	"wait-reply_no_agent.txtar",
	"wait-reply_no_lost_wakeup.txtar",
	"wait-reply_now.txtar",
	"wait-reply_terminal.txtar",
	"wait-reply_timeout.txtar",
	"watch_after_event.txtar",
	"watch_errors.txtar",
	"watch_new_thread.txtar",
	"watch_status.txtar",
	"watch_timeout.txtar",
	"worker_loop.txtar",
	"reading_one_model.txtar",
	"mail_threads_list.txtar",
	"claude_seed002_protocol.txtar",
	"claude_teams_flags.txtar",
	"edges_claim_assigned.txtar",
	"edges_events_limit.txtar",
	"edges_flag_suggest.txtar",
	"edges_kinds_notation.txtar",
	"edges_lease_expired_shown.txtar",
	"edges_note_short.txtar",
	"edges_push_prompt.txtar",
	"edges_show_max_body.txtar",
	"edges_unknown_agent.txtar",
	"edges_update_done.txtar",
	"mailbox_from_finished.txtar",
	"queue_name_reuse.txtar",
	"seed003_workflows.txtar",
	"team_files_protocol.txtar",
	"search.txtar",
	"search_bounds.txtar",
	"idempotency_conflict.txtar",
	"output_control_chars.txtar",
}

func TestScriptsNATS(t *testing.T) {
	t.Parallel() // beside the tests that wait, after the serial ones
	srv := natstest.Start(t)
	p := scriptParams(filepath.Join("..", "..", "..", "testdata", "script"))
	if os.Getenv("INBOX_NATS_SCRIPTS") != "all" { // all: every script, to see which could join the list
		p.Dir = ""
		for _, f := range natsScripts {
			p.Files = append(p.Files, filepath.Join("..", "..", "..", "testdata", "script", f))
		}
		// And the scripts about NATS stores only (INBOX_TEST_DIRS=1 in a
		// script keeps its directory stores directories).
		more, _ := filepath.Glob(filepath.Join("..", "..", "..", "testdata", "nats", "*.txtar"))
		p.Files = append(p.Files, more...)
	}
	setup := p.Setup
	p.Setup = func(e *testscript.Env) error {
		if err := setup(e); err != nil {
			return err
		}
		e.Setenv("INBOX_TEST_NATS", srv.ClientURL())
		return nil
	}
	testscript.Run(t, p)
}

// natsStoreFor is the NATS store of server that stands for the directory
// store at abs.
func natsStoreFor(server, abs string) string {
	sum := sha256.Sum256([]byte(abs))
	return server + "/s" + hex.EncodeToString(sum[:8])
}

// TestNATSSecretsStayOut runs the real binaries on a store whose server
// wants a password, given in the store's URL, and looks everywhere it
// must not show (SPEC §8): an error (a wrong password), the argv of a
// command handed over to inbox-nats or run as inbox-nats itself, the
// runner's argv and a task's environment (the task still uses the
// store), the settings file hook install writes. The runner's file that
// hands tasks the password is gone once the runner is.
func TestNATSSecretsStayOut(t *testing.T) {
	goBin, err := exec.LookPath("go")
	if err != nil {
		t.Fatalf("the go command is needed to build the binaries: %v", err)
	}
	bin := t.TempDir()
	build := exec.Command(goBin, "build", "-o", bin+"/", "../../inbox", "../../inbox-nats")
	build.Env = append(build.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	const password = "s3cretPW"
	srv := natstest.StartAuth(t, "alice", password)
	host := strings.TrimPrefix(srv.ClientURL(), "nats://")
	db := "nats://alice:" + password + "@" + host + "/secrets"
	public := "nats://alice@" + host + "/secrets"
	work := t.TempDir()
	home := filepath.Join(work, "home")
	var environ []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "INBOX_") && !strings.HasPrefix(kv, "NATS_") && !strings.HasPrefix(kv, "HOME=") && !strings.HasPrefix(kv, "PATH=") {
			environ = append(environ, kv)
		}
	}
	environ = append(environ, "PATH="+bin+":"+os.Getenv("PATH"), "HOME="+home, "XDG_CACHE_HOME="+filepath.Join(work, "cache"), "WORK="+work)
	noSecret := func(what, text string) {
		t.Helper()
		if strings.Contains(text, password) || strings.Contains(text, "WRONGpw") {
			t.Errorf("%s shows the password:\n%s", what, text)
		}
	}
	command := func(name string, args ...string) *exec.Cmd {
		cmd := exec.Command(filepath.Join(bin, name), args...)
		cmd.Env = environ
		return cmd
	}
	runInbox := func(want int, args ...string) string {
		t.Helper()
		cmd := command("inbox", args...)
		var stdout, stderr strings.Builder
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		code, err := exitStatus(cmd.Run())
		if err != nil || code != want {
			t.Fatalf("inbox %s: exit %d (%v), want %d\n%s%s", strings.Join(args, " "), code, err, want, stdout.String(), stderr.String())
		}
		noSecret("inbox "+args[0]+"'s output", stdout.String()+stderr.String())
		return stdout.String()
	}
	jsonOut := func(out string) map[string]any {
		t.Helper()
		var v map[string]any
		if err := json.Unmarshal([]byte(out), &v); err != nil {
			t.Fatalf("not JSON: %v\n%s", err, out)
		}
		return v
	}

	// Errors: a wrong password, as text and as JSON.
	runInbox(50, "list", "--db", "nats://alice:WRONGpw@"+host+"/secrets")
	runInbox(50, "list", "--json", "--db", "nats://alice:WRONGpw@"+host+"/secrets")
	runInbox(0, "init", "--db", db)
	// The store named by INBOX_DB: the command's output names it without
	// the password.
	initEnv := command("inbox", "init")
	initEnv.Env = append(initEnv.Env, "INBOX_DB="+db)
	if out, err := initEnv.CombinedOutput(); err != nil || !strings.Contains(string(out), public) {
		t.Errorf("INBOX_DB=%s inbox init: %v\n%s", db, err, out)
	} else {
		noSecret("inbox init's output", string(out))
	}

	// A blocked wait-reply, handed over by inbox and run as inbox-nats
	// itself: its argv holds no password.
	out := runInbox(0, "send", "--db", db, "--agent", "boss", "--json", "w", "a job")
	tid := jsonOut(out)["thread"].(map[string]any)["thread_id"].(string)
	for _, name := range []string{"inbox", "inbox-nats"} {
		w := command(name, "wait-reply", "--db", db, "--agent", "boss", "--thread", tid, "--timeout-seconds", "120")
		var stderr strings.Builder
		w.Stderr = &stderr
		if err := w.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { w.Process.Kill(); w.Wait() })
		waiting := testproc.Poll(30*time.Second, func() bool {
			for _, a := range jsonOut(runInbox(0, "agents", "--db", db, "--json"))["agents"].([]any) {
				if a := a.(map[string]any); a["agent"] == "boss" && a["state"] == "waiting" {
					return true
				}
			}
			return false
		})
		if !waiting {
			t.Fatalf("%s wait-reply never waited: %s", name, stderr.String())
		}
		argv, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", w.Process.Pid))
		if err != nil {
			t.Fatal(err)
		}
		noSecret(name+" wait-reply's argv", string(argv))
		if !strings.Contains(string(argv), public) {
			t.Errorf("%s wait-reply's argv does not name the store without its password (%s): %q", name, public, argv)
		}
		w.Process.Kill()
		w.Wait()
		noSecret(name+" wait-reply's output", stderr.String())
	}

	// A task: its environment and its runner's argv hold no password,
	// yet it uses the store.
	task := filepath.Join(work, "task.sh")
	os.WriteFile(task, []byte(`tr '\0' ' ' < /proc/$PPID/cmdline > "$WORK/runner.argv"
env > "$WORK/task.env"
inbox send main 'a note from the task' >/dev/null || exit 1
printf ok
`), 0o600)
	runInbox(0, "push", "--db", db, "--name", "t1", "do it")
	runner := int(jsonOut(runInbox(0, "run", "--db", db, "--json", "--exec", "sh "+task))["runner_pid"].(float64))
	got := map[string]string{}
	for range 2 {
		m := jsonOut(runInbox(0, "receive", "--db", db, "--agent", "main", "--timeout-seconds", "30", "--json"))["message"].(map[string]any)
		got[m["kind"].(string)] = m["body"].(string)
	}
	if got["result"] != "ok" || got["progress"] != "a note from the task" {
		t.Errorf("the task's messages: %v", got)
	}
	env, _ := os.ReadFile(filepath.Join(work, "task.env"))
	noSecret("the task's environment", string(env))
	if !strings.Contains(string(env), "INBOX_DB="+public+"\n") {
		t.Errorf("the task's INBOX_DB is not %s:\n%s", public, env)
	}
	argv, _ := os.ReadFile(filepath.Join(work, "runner.argv"))
	noSecret("the runner's argv", string(argv))
	if len(argv) == 0 {
		t.Error("the task did not read its runner's argv")
	}
	// The runner's file for its tasks goes with it.
	if !testproc.Poll(30*time.Second, func() bool { return syscall.Kill(runner, 0) != nil }) {
		t.Fatalf("the runner (pid %d) did not exit", runner)
	}
	for _, kv := range strings.Split(string(env), "\n") {
		if p, ok := strings.CutPrefix(kv, inbox.EnvNATSPasswordFile+"="); ok {
			if _, err := os.Stat(p); !errors.Is(err, os.ErrNotExist) {
				t.Errorf("the runner left %s behind: %v", p, err)
			}
		}
	}

	// hook install: the settings file names the store without the
	// password, and the output says where the hook finds it.
	out = runInbox(0, "hook", "install", "claude", "--db", db, "--agent", "dev")
	settings, err := os.ReadFile(filepath.Join(home, ".claude", "settings.json"))
	if err != nil {
		t.Fatal(err)
	}
	noSecret("the settings file", string(settings))
	if !strings.Contains(string(settings), "--db "+public) {
		t.Errorf("the hooks do not name the store %s:\n%s", public, settings)
	}
	if !strings.Contains(out, inbox.EnvNATSPassword) {
		t.Errorf("hook install does not say how the hook gets the password:\n%s", out)
	}
}

// moveSecrets takes the password or token of every NATS store URL a
// command line names (--db, --from, --to, INBOX_DB) into
// INBOX_NATS_PASSWORD, and nothing else.
func TestMoveSecrets(t *testing.T) {
	const h = "127.0.0.1:4222"
	for _, tc := range []struct {
		name             string
		args, env        []string
		wantArgs         []string
		wantDB, wantPass string
	}{
		{"--db", []string{"list", "--db", "nats://alice:pw@" + h + "/S", "--json"}, nil,
			[]string{"list", "--db", "nats://alice@" + h + "/S", "--json"}, "", "pw"},
		{"--db=", []string{"--db=nats://TOK@" + h + "/S", "list"}, nil,
			[]string{"--db=nats://" + h + "/S", "list"}, "", "TOK"},
		{"migrate", []string{"migrate", "--from", "dir", "--to", "tls://alice:pw@" + h + "/S"}, nil,
			[]string{"migrate", "--from", "dir", "--to", "tls://alice@" + h + "/S"}, "", "pw"},
		{"INBOX_DB", []string{"list"}, []string{"INBOX_DB=nats://alice:pw@" + h + "/S"},
			[]string{"list"}, "nats://alice@" + h + "/S", "pw"},
		// A user whose password the environment gives already stays.
		{"password in env", []string{"list", "--db", "nats://alice@" + h + "/S"}, []string{"INBOX_NATS_PASSWORD=pw"},
			[]string{"list", "--db", "nats://alice@" + h + "/S"}, "", "pw"},
		// After "--", and anywhere but a store flag, words are the user's.
		{"message", []string{"send", "bob", "--", "--db", "nats://alice:pw@" + h + "/S"}, nil,
			[]string{"send", "bob", "--", "--db", "nats://alice:pw@" + h + "/S"}, "", ""},
		{"directory", []string{"list", "--db", "some/dir"}, nil, []string{"list", "--db", "some/dir"}, "", ""},
		// An unreadable password file is natsbus's to report: the user
		// is not taken for a token, which would hide the file.
		{"bad file", []string{"list", "--db", "nats://alice@" + h + "/S"}, []string{"INBOX_NATS_PASSWORD_FILE=/nonexistent"},
			[]string{"list", "--db", "nats://alice@" + h + "/S"}, "", ""},
		{"bad file, password in the URL", []string{"list", "--db", "nats://alice:pw@" + h + "/S"}, []string{"INBOX_NATS_PASSWORD_FILE=/nonexistent"},
			[]string{"list", "--db", "nats://alice@" + h + "/S"}, "", "pw"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			args, env, changed := moveSecrets(tc.args, append([]string{"HOME=/h"}, tc.env...))
			if !slices.Equal(args, tc.wantArgs) || changed != !slices.Equal(tc.args, tc.wantArgs) {
				t.Errorf("args %q (changed %v), want %q", args, changed, tc.wantArgs)
			}
			got := map[string]string{}
			for _, kv := range env {
				k, v, _ := strings.Cut(kv, "=")
				if _, dup := got[k]; dup {
					t.Errorf("%s twice in %q", k, env)
				}
				got[k] = v
			}
			if got["INBOX_DB"] != tc.wantDB || got[inbox.EnvNATSPassword] != tc.wantPass || got["HOME"] != "/h" {
				t.Errorf("environment %q, want INBOX_DB=%q and %s=%q", env, tc.wantDB, inbox.EnvNATSPassword, tc.wantPass)
			}
		})
	}
}
