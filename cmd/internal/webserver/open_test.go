package webserver

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/inbox-dev/inbox/internal/testproc"
)

// fakeOpenerMain is xdg-open for the tests: it appends its arguments, one
// line, to the file $INBOX_TEST_OPENED names (and fails without it).
func fakeOpenerMain() {
	f, err := os.OpenFile(os.Getenv("INBOX_TEST_OPENED"), os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600)
	if err != nil {
		fmt.Fprintln(os.Stderr, "xdg-open (the tests'):", err)
		os.Exit(1)
	}
	fmt.Fprintln(f, strings.Join(os.Args[1:], " "))
	f.Close()
}

// TestOpenCarriesNoSecret: inbox web --open runs the desktop's opener on
// a file:// URL (a command line every local user can read in /proc), so
// the command line carries no secret: the file, owner-only beside the
// token file, sends the browser on to a launch URL of its own, which works
// once; the file goes once it is used, or when the server stops; the
// printed URL is still the user's.
func TestOpenCarriesNoSecret(t *testing.T) {
	db := newStore(t)
	opened := filepath.Join(t.TempDir(), "opened")
	d := startDashboardEnv(t, db, []string{"INBOX_TEST_OPENED=" + opened}, "--open")
	var argv string
	testproc.Eventually(t, 20*time.Second, "the opener run", func() bool {
		b, _ := os.ReadFile(opened)
		argv = strings.TrimSpace(string(b))
		return argv != ""
	})
	page := filepath.Join(filepath.Dir(d.tokenFile), "web-open.html")
	if argv != "file://"+page {
		t.Fatalf("the opener's arguments: %q, want file://%s", argv, page)
	}
	fi, err := os.Lstat(page)
	if err != nil || !fi.Mode().IsRegular() || fi.Mode().Perm() != 0o600 {
		t.Fatalf("the page --open opens: %v %v, want a regular file 0600", fi, err)
	}
	b, err := os.ReadFile(page)
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`<meta http-equiv="refresh" content="0;url=(http://127\.0\.0\.1:[0-9]+/\?token=([0-9a-f]{64}))">`).FindStringSubmatch(string(b))
	if m == nil || !strings.HasPrefix(m[1], d.base+"/") {
		t.Fatalf("the page --open opens does not send on to the dashboard:\n%s", b)
	}
	if m[2] == d.token || m[1] == d.url {
		t.Errorf("the page --open opens holds the token or the printed URL, not a launch URL of its own:\n%s", b)
	}
	if st, _ := d.do(t, "GET", strings.TrimPrefix(m[1], d.base), "", "Authorization", ""); st != 200 {
		t.Fatalf("the launch URL of the page --open opens: %d", st)
	}
	testproc.Eventually(t, 20*time.Second, "the page --open opened to go once used", func() bool {
		_, err := os.Lstat(page)
		return os.IsNotExist(err)
	})
	if st, _ := d.do(t, "GET", strings.TrimPrefix(m[1], d.base), "", "Authorization", ""); st != 401 {
		t.Errorf("the launch URL of the page --open opens, again: %d, want 401", st)
	}
	if st, _ := d.do(t, "GET", strings.TrimPrefix(d.url, d.base), "", "Authorization", ""); st != 200 {
		t.Errorf("the printed URL after --open's: %d, want 200", st)
	}

	// Unused, it goes when the server stops.
	d2 := startDashboardEnv(t, db, []string{"INBOX_TEST_OPENED=" + opened}, "--open", "--addr", "127.0.0.1:0")
	testproc.Eventually(t, 20*time.Second, "the second server's page", func() bool {
		_, err := os.Lstat(page)
		return err == nil
	})
	d2.stop(t)
	if _, err := os.Lstat(page); !os.IsNotExist(err) {
		t.Errorf("the page --open opens is still there after the server stopped: %v", err)
	}
}
