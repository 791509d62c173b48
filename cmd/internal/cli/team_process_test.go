package cli

import (
	"encoding/json"
	"fmt"
	"os/exec"
	"slices"
	"strings"
	"testing"

	"github.com/inbox-dev/inbox"
	"github.com/inbox-dev/inbox/internal/storetest"
	"github.com/inbox-dev/inbox/internal/testproc"
	"github.com/inbox-dev/inbox/spool"
)

// TestTeamBroadcastProcesses: 4 processes each broadcast 100 messages to a
// team of 8 through the CLI at the same time. Every member's mailbox gets
// each of the 400 exactly once, in event order, and each broadcast is one
// message of one thread.
func TestTeamBroadcastProcesses(t *testing.T) {
	const broadcasters, each, members = 4, 100, 8
	s, db, team := crewStore(t, members)
	bin := testproc.Installed(t, "inbox")
	cmds := make([]*exec.Cmd, broadcasters)
	for b := range cmds {
		script := fmt.Sprintf(`i=0; while [ $i -lt %d ]; do i=$((i+1)); %s send --db %s --from b%d --to @crew --type team_broadcast --content-json "{\"text\":\"b%d #$i\"}" --json || exit 1; done`,
			each, shq(bin), shq(db), b, b)
		cmds[b] = exec.Command("sh", "-c", script)
	}
	outs := runConcurrently(t, cmds)
	sent := map[string]bool{}
	for b, o := range outs {
		if o.err != nil {
			t.Fatalf("broadcaster %d: %v: %s", b, o.err, o.stderr.String())
		}
		dec := json.NewDecoder(&o.stdout)
		for dec.More() {
			var out struct {
				Message inbox.Message `json:"message"`
			}
			if err := dec.Decode(&out); err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(out.Message.Recipients, team) {
				t.Fatalf("recipients %v, want %v", out.Message.Recipients, team)
			}
			sent[out.Message.MessageID] = true
		}
	}
	if len(sent) != broadcasters*each {
		t.Fatalf("%d broadcasts acknowledged, want %d", len(sent), broadcasters*each)
	}
	for _, m := range team {
		out, err := exec.Command(bin, "check", "--db", db, "--agent", m, "--json").Output()
		if err != nil {
			t.Fatalf("check %s: %v", m, err)
		}
		var got struct {
			Messages []*inbox.Message `json:"messages"`
		}
		if err := json.Unmarshal(out, &got); err != nil {
			t.Fatal(err)
		}
		seen := map[string]bool{}
		var last int64
		for _, msg := range got.Messages {
			if !sent[msg.MessageID] || seen[msg.MessageID] {
				t.Fatalf("%s: message %s unknown or delivered twice", m, msg.MessageID)
			}
			if msg.EventID <= last {
				t.Fatalf("%s: event %d after %d: not in event order", m, msg.EventID, last)
			}
			seen[msg.MessageID], last = true, msg.EventID
		}
		if len(seen) != len(sent) {
			t.Errorf("%s collected %d of %d broadcasts", m, len(seen), len(sent))
		}
	}
	if r, err := s.Fsck(t.Context(), false); err != nil || !r.Clean() || r.Messages != broadcasters*each {
		t.Fatalf("fsck: %+v %v", r, err)
	}
}

// TestTeamClaimRaceProcesses: 200 threads sent to a team of 8; 8 member
// processes claim all of them in the same order. Each thread has exactly
// one winner, the losers get a lease conflict, and no member's fetch still
// offers a claimed thread.
func TestTeamClaimRaceProcesses(t *testing.T) {
	const members, threads = 8, 200
	s, db, team := crewStore(t, members)
	var ids []string
	for i := range threads {
		r, err := s.Send(t.Context(), inbox.SendInput{From: "lead", To: "@crew", Subject: fmt.Sprintf("job %d", i)})
		if err != nil {
			t.Fatal(err)
		}
		if r.Thread.AssignedTo != "" {
			t.Fatalf("a team thread assigned to %s", r.Thread.AssignedTo)
		}
		ids = append(ids, r.Thread.ThreadID)
	}
	winners := map[string][]string{}
	for p, o := range claimRace(t, db, ids, team) {
		for _, line := range strings.Split(strings.TrimSpace(o.stdout.String()), "\n") {
			var tid string
			var code int
			if _, err := fmt.Sscanf(line, "%s %d", &tid, &code); err != nil {
				t.Fatalf("%q: %v", line, err)
			}
			switch code {
			case exitOK:
				winners[tid] = append(winners[tid], team[p])
			case exitConflict:
			default:
				t.Fatalf("%s claiming %s: exit %d", team[p], tid, code)
			}
		}
	}
	for _, tid := range ids {
		w := winners[tid]
		if len(w) != 1 {
			t.Fatalf("thread %s: winners %v", tid, w)
		}
		th, err := s.Thread(t.Context(), tid)
		if err != nil || th.AssignedTo != w[0] || th.Status != inbox.StatusClaimed {
			t.Fatalf("thread %s: %+v %v, winner %s", tid, th, err, w[0])
		}
	}
	for _, m := range team {
		if th, err := s.Fetch(t.Context(), m, nil, inbox.MaxLimit, false); err != nil || len(th) != 0 {
			t.Errorf("%s's fetch after the race: %d threads, %v", m, len(th), err)
		}
	}
}

// crewStore makes a store with a team "crew" of n members, m0 to m(n-1),
// created by "lead", and returns the open store, its path and the members.
func crewStore(t *testing.T, n int) (*spool.Store, string, []string) {
	t.Helper()
	s, db := storetest.New(t, spool.Options{})
	var team []string
	for i := range n {
		team = append(team, fmt.Sprintf("m%d", i))
	}
	if _, err := s.CreateTeam(t.Context(), "lead", "crew", team); err != nil {
		t.Fatal(err)
	}
	return s, db, team
}
