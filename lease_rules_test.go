package inbox_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/inbox-dev/inbox"
)

// A lease records the length it was claimed and renewed with; one
// recorded without it (before lease_seconds) is taken as its expiry less
// its claim.
func TestLeaseLength(t *testing.T) {
	now := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	th := &inbox.Thread{ThreadID: "thr_a", Status: inbox.StatusPending}
	l, err := inbox.ClaimLease(th, nil, "w", 900, now)
	if err != nil {
		t.Fatal(err)
	}
	if l.LeaseSeconds != 900 || inbox.LeaseLength(&l) != 900 {
		t.Errorf("claimed for 900 s: lease_seconds %d, length %d", l.LeaseSeconds, inbox.LeaseLength(&l))
	}
	th.Status = inbox.StatusBlocked
	r, err := inbox.RenewLease(th, &l, "w", 0, 60, now.Add(100*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	if inbox.LeaseLength(&r) != 60 {
		t.Errorf("renewed for 60 s: length %d", inbox.LeaseLength(&r))
	}
	if at, want := inbox.LeaseRenewAt(&r), now.Add(130*time.Second); !at.Equal(want) {
		t.Errorf("a 60 s lease renewed at +100 s is renewed again at %v, want %v (half of it left)", at, want)
	}
	old := inbox.Lease{ClaimedAt: inbox.FormatTime(now), ExpiresAt: inbox.FormatTime(now.Add(300 * time.Second))}
	if n := inbox.LeaseLength(&old); n != 300 {
		t.Errorf("a lease without lease_seconds, claimed for 300 s: length %d", n)
	}
}

// Only the holder's own wait keeps a lease: its agent, live, the token it
// gave if any, on a thread not ended; a wait that names no agent never.
func TestWaitKeepsLease(t *testing.T) {
	now := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	th := &inbox.Thread{ThreadID: "thr_a", Status: inbox.StatusPending}
	l, err := inbox.ClaimLease(th, nil, "w", 60, now)
	if err != nil {
		t.Fatal(err)
	}
	th.Status = inbox.StatusBlocked
	done := &inbox.Thread{ThreadID: "thr_a", Status: inbox.StatusDone}
	for _, c := range []struct {
		what  string
		t     *inbox.Thread
		l     *inbox.Lease
		agent string
		token int64
		at    time.Time
		want  bool
	}{
		{"the holder", th, &l, "w", 0, now, true},
		{"the holder with its token", th, &l, "w", l.LeaseToken, now, true},
		{"the holder with another token", th, &l, "w", l.LeaseToken + 1, now, false},
		{"another agent", th, &l, "leader", 0, now, false},
		{"no agent", th, &l, "", 0, now, false},
		{"the holder once the lease ran out", th, &l, "w", 0, now.Add(time.Minute), false},
		{"the holder of an ended thread", done, &l, "w", 0, now, false},
		{"a thread never claimed", th, nil, "w", 0, now, false},
	} {
		if got := inbox.WaitKeepsLease(c.t, c.l, c.agent, c.token, c.at); got != c.want {
			t.Errorf("%s: keeps the lease %v, want %v", c.what, got, c.want)
		}
	}
}

// KeepLease renews when half the lease is left, with the lease's agent,
// length and token, and stops at the first refusal.
func TestKeepLease(t *testing.T) {
	now := time.Now()
	l := inbox.Lease{ThreadID: "thr_a", AgentID: "w", LeaseToken: 3, ClaimedAt: inbox.FormatTime(now),
		ExpiresAt: inbox.FormatTime(now.Add(time.Second)), LeaseSeconds: 1}
	var calls atomic.Int32
	refused := make(chan struct{})
	stop := inbox.KeepLease(t.Context(), l, time.Now, func(ctx context.Context, agent, tid string, secs int, token int64) (*inbox.Result, error) {
		if agent != "w" || tid != "thr_a" || secs != 1 || token != 3 {
			t.Errorf("renew(%s, %s, %d, %d), want (w, thr_a, 1, 3)", agent, tid, secs, token)
		}
		if calls.Add(1) == 2 {
			close(refused)
			return nil, inbox.Errorf(inbox.ErrStaleToken, "stale_lease_token", "lease_token", "stale")
		}
		r := l
		r.ExpiresAt = inbox.FormatTime(time.Now().Add(time.Second))
		return &inbox.Result{Lease: &r}, nil
	})
	defer stop()
	select {
	case <-refused:
	case <-time.After(10 * time.Second):
		t.Fatalf("%d renewals in 10 s of a 1 s lease", calls.Load())
	}
	if took := time.Since(now); took < time.Second {
		t.Errorf("two renewals of a 1 s lease within %v: more than one per half lease", took)
	}
	// Nothing comes after the refusal: not a retry (a storage error's,
	// 100 ms later for this lease), not a renewal (at once: half the
	// lease is long gone).
	time.Sleep(500 * time.Millisecond)
	stop()
	if n := calls.Load(); n != 2 {
		t.Errorf("%d renewals, want 2: a refused renewal ends the keeping", n)
	}
}
