package webserver

import (
	"path/filepath"
	"testing"
)

// richStore is a store that looks like a team at work, made with the CLI:
// a lead and four workers in a team; threads pending, in progress,
// blocked on a question to the lead, done, failed and cancelled; two
// workers deadlocked on each other; mail waiting, an acknowledgment owed;
// a task in the queue. The views that only read use it, and the README's
// screenshot is taken of it.
type richStore struct {
	db      string
	lead    string
	blocked string // the thread blocked on a question to the lead
	d       *dashboard
}

func newRichStore(tb testing.TB) *richStore {
	tb.Helper()
	// Where a project keeps its store, as the screenshot shows it.
	db := filepath.Join(tb.TempDir(), "shop", ".agents", "inbox")
	inboxCLI(tb, db, "init")
	s := &richStore{db: db, lead: "lead"}
	cli := func(args ...string) map[string]any { return inboxCLI(tb, db, args...) }
	send := func(to, subject, body string) string {
		return threadOf(tb, cli("send", "--from", "lead", "--to", to, "--subject", subject, "--body", body))
	}
	cli("team", "create", "checkout", "--member", "backend,frontend,docs,tests", "--agent", "lead")

	pagination := send("backend", "Add cursor pagination to /v1/orders",
		"The orders table has an index on (customer_id, created_at); keep the schema as it is and page on it.")
	cli("claim", "--agent", "backend", "--thread", pagination, "--lease-seconds", "1800")
	cli("update", "--agent", "backend", "--thread", pagination, "--status", "in_progress",
		"--summary", "cursor encoding done, wiring the handler")

	s.blocked = send("frontend", "Checkout: show the order history",
		"A list under the cart, newest first, 20 at a time.")
	cli("claim", "--agent", "frontend", "--thread", s.blocked)
	cli("update", "--agent", "frontend", "--thread", s.blocked, "--status", "blocked",
		"--summary", "Should the history page by cursor or by page number?")

	send("docs", "Document the orders API", "Reference pages for /v1/orders and its pagination.")

	flaky := send("tests", "Fix the flaky login test", "It fails one run in twenty on CI.")
	cli("claim", "--agent", "tests", "--thread", flaky)
	cli("done", "--agent", "tests", "--thread", flaky, "--summary", "a race on the session cookie: the test now waits for the redirect")

	load := send("tests", "Load test the checkout", "500 carts a minute for ten minutes.")
	cli("claim", "--agent", "tests", "--thread", load)
	cli("fail", "--agent", "tests", "--thread", load, "--summary", "staging is down: the load balancer answers 502")

	readme := send("docs", "Translate the README to French", "")
	cli("cancel", "--agent", "lead", "--thread", readme, "--reason", "not for this release")

	// docs and backend wait on each other.
	changelog := threadOf(tb, cli("send", "--from", "backend", "--to", "docs", "--subject", "Write the changelog entry for pagination"))
	codes := threadOf(tb, cli("send", "--from", "docs", "--to", "backend", "--subject", "List the error codes of /v1/orders"))
	cli("claim", "--agent", "docs", "--thread", changelog)
	cli("claim", "--agent", "backend", "--thread", codes)
	cli("update", "--agent", "docs", "--thread", changelog, "--status", "blocked", "--summary", "Is the page size configurable?")
	cli("update", "--agent", "backend", "--thread", codes, "--status", "blocked", "--summary", "Which wording do the docs use for a bad cursor?")

	cli("send", "--from", "lead", "--to", "frontend", "--ack-required", "--body", "Design review of the checkout at 15:00")
	cli("send", "--from", "lead", "--to", "tests", "--body", "Standup moves to 10:30 tomorrow")
	cli("push", "--agent", "lead", "--name", "bench-orders", "Benchmark the orders query on a million rows")
	return s
}
