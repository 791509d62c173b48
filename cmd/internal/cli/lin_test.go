package cli

// Linearizability of leases: real processes claim, renew and finish
// threads concurrently; their histories (with call and return times) are
// checked against a sequential model of the lease rules with porcupine,
// partitioned by thread. Lease expiry is modelled: an operation whose
// interval straddles a lease's expiry may see it either live or expired.

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"

	"github.com/inbox-dev/inbox"
	"github.com/inbox-dev/inbox/internal/testproc"
	"github.com/inbox-dev/inbox/spool"
)

type linIn struct {
	Client int    `json:"c"`
	Op     string `json:"op"` // claim, renew, done
	Thread string `json:"tid"`
	Agent  string `json:"agent"`
	Token  int64  `json:"token"`
	Lease  int    `json:"lease"`
	Call   int64  `json:"call"`
	Ret    int64  `json:"ret"`
}

type linOut struct {
	Code    int   `json:"code"`
	Token   int64 `json:"out_token"`
	Expires int64 `json:"expires"` // unix ns, from the lease the call returned
}

type linRecord struct {
	linIn
	linOut
}

// linHelper: inbox-test-helper lin DB CLIENT AGENT SEED OPS THREAD...
func linHelper(ctx context.Context, args []string) {
	s, err := spool.Open(ctx, args[0], spool.Options{})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(50)
	}
	client, _ := strconv.Atoi(args[1])
	agent := args[2]
	seed, _ := strconv.ParseUint(args[3], 10, 64)
	ops, _ := strconv.Atoi(args[4])
	tids := args[5:]
	rng := rand.New(rand.NewPCG(seed, uint64(client)))
	tokens := map[string]int64{}
	w := bufio.NewWriter(os.Stdout)
	defer w.Flush()
	enc := json.NewEncoder(w)
	for i := 0; i < ops; i++ {
		time.Sleep(time.Duration(rng.IntN(16000)) * time.Microsecond)
		in := linIn{Client: client, Thread: tids[rng.IntN(len(tids))], Agent: agent}
		switch r := rng.IntN(40); {
		case r < 19:
			in.Op = "claim"
			in.Lease = []int{1, 1, 2, 900}[rng.IntN(4)]
		case r < 39:
			in.Op = "renew"
			in.Lease = []int{1, 2, 900}[rng.IntN(3)]
		default:
			in.Op = "done"
		}
		if in.Op != "claim" {
			switch rng.IntN(10) {
			case 0:
				in.Token = 0 // no fencing
			case 1:
				in.Token = max(1, tokens[in.Thread]-1) // stale
			default:
				in.Token = tokens[in.Thread]
			}
		}
		var res *inbox.Result
		in.Call = time.Now().UnixNano()
		switch in.Op {
		case "claim":
			res, err = s.Claim(ctx, agent, in.Thread, in.Lease)
		case "renew":
			res, err = s.Renew(ctx, agent, in.Thread, in.Lease, in.Token)
		default:
			res, err = s.Done(ctx, agent, in.Thread, in.Token, inbox.Content{Summary: "finished"})
		}
		in.Ret = time.Now().UnixNano()
		out := linOut{Code: exitCode(err)}
		if err == nil && res.Lease != nil {
			out.Token = res.Lease.LeaseToken
			if t, perr := time.Parse(time.RFC3339Nano, res.Lease.ExpiresAt); perr == nil {
				out.Expires = t.UnixNano()
			}
			if in.Op == "claim" {
				tokens[in.Thread] = out.Token
			}
		}
		enc.Encode(linRecord{in, out})
	}
}

// linState is one thread as the model sees it.
type linState struct {
	holder   string
	token    int64
	expires  int64
	claimed  bool // a lease was ever granted
	released bool
	done     bool
}

func linStep(state, input, output any) (bool, any) {
	s, in, out := state.(linState), input.(linIn), output.(linOut)
	if s.done {
		return out.Code == exitInvalid, s
	}
	held := s.claimed && !s.released
	// surely / maybe: the lease is live for the whole call, or at some
	// instant of it (the store read the clock somewhere in [call, ret]).
	surelyLive := held && s.expires > in.Ret
	surelyExpired := !held || s.expires <= in.Call
	switch in.Op {
	case "claim":
		if held && s.holder != in.Agent {
			if surelyLive {
				return out.Code == exitConflict, s
			}
			if !surelyExpired && out.Code == exitConflict {
				return true, s
			}
		}
		if out.Code != 0 || out.Token != s.token+1 {
			return false, s
		}
		n := s
		n.holder, n.token, n.expires, n.claimed, n.released = in.Agent, out.Token, out.Expires, true, false
		return true, n
	default: // renew, done: holder commands
		if !held {
			return out.Code == exitInvalid, s
		}
		if s.holder != in.Agent || (in.Token != 0 && in.Token != s.token) {
			return out.Code == exitConflict, s
		}
		if surelyExpired {
			return out.Code == exitConflict, s
		}
		if !surelyLive && out.Code == exitConflict {
			return true, s // it expired during the call
		}
		if out.Code != 0 {
			return false, s
		}
		n := s
		if in.Op == "renew" {
			n.expires = out.Expires
		} else {
			n.done, n.released = true, true
		}
		return true, n
	}
}

var leaseModel = porcupine.Model{
	Partition: func(h []porcupine.Operation) [][]porcupine.Operation {
		by := map[string][]porcupine.Operation{}
		var order []string
		for _, op := range h {
			tid := op.Input.(linIn).Thread
			if _, ok := by[tid]; !ok {
				order = append(order, tid)
			}
			by[tid] = append(by[tid], op)
		}
		var parts [][]porcupine.Operation
		for _, tid := range order {
			parts = append(parts, by[tid])
		}
		return parts
	},
	Init: func() any { return linState{} },
	Step: linStep,
	DescribeOperation: func(input, output any) string {
		in, out := input.(linIn), output.(linOut)
		return fmt.Sprintf("%s %s(%s, token %d) -> %d (token %d)", in.Agent, in.Op, in.Thread, in.Token, out.Code, out.Token)
	},
}

// runLin records one history: clients processes, ops each, on threads.
func runLin(t *testing.T, seed uint64, clients, ops, threads int) []porcupine.Operation {
	db, ids := newStore(t, threads)
	helper := testproc.Installed(t, "inbox-test-helper")
	cmds := make([]*exec.Cmd, clients)
	for c := range cmds {
		agent := fmt.Sprintf("a%d", c%(clients/2+1)) // some clients share an agent
		args := append([]string{"lin", db, strconv.Itoa(c), agent, strconv.FormatUint(seed, 10), strconv.Itoa(ops)}, ids...)
		cmds[c] = exec.Command(helper, args...)
	}
	outs := runConcurrently(t, cmds)
	for c, o := range outs {
		if o.err != nil {
			t.Errorf("client %d: %v %s", c, o.err, o.stderr.String())
		}
	}
	var h []porcupine.Operation
	for c := range outs {
		for _, line := range strings.Split(strings.TrimSpace(outs[c].stdout.String()), "\n") {
			var r linRecord
			if err := json.Unmarshal([]byte(line), &r); err != nil {
				t.Fatalf("client %d printed %q", c, line)
			}
			h = append(h, porcupine.Operation{ClientId: c, Input: r.linIn, Call: r.Call, Output: r.linOut, Return: r.Ret})
		}
	}
	return h
}

// TestLeaseLinearizability checks histories of concurrent claim, renew and
// done from real processes, for several seeds.
func TestLeaseLinearizability(t *testing.T) {
	seeds := 6
	if testing.Short() {
		seeds = 2
	}
	total, ok := 0, map[int]int{}
	for seed := 1; seed <= seeds; seed++ {
		h := runLin(t, uint64(seed), 4, 150, 5)
		total += len(h)
		for _, op := range h {
			ok[op.Output.(linOut).Code]++
		}
		res, info := porcupine.CheckOperationsVerbose(leaseModel, h, 30*time.Second)
		if res != porcupine.Ok {
			f, _ := os.CreateTemp("", "lease-history-*.html")
			porcupine.Visualize(leaseModel, info, f)
			f.Close()
			t.Fatalf("seed %d: history of %d operations is not linearizable (%v); visualization in %s", seed, len(h), res, f.Name())
		}
	}
	t.Logf("%d seeds, %d operations checked linearizable; outcomes by exit code: %v", seeds, total, ok)
}

// TestLeaseModelRejectsBrokenHistories shows that the checker can fail:
// two claims of one live lease both succeeding, and a stale token
// accepted, are not linearizable.
func TestLeaseModelRejectsBrokenHistories(t *testing.T) {
	far := time.Now().Add(time.Hour).UnixNano()
	op := func(c int, o, agent string, token int64, call, ret int64, code int, outTok int64) porcupine.Operation {
		return porcupine.Operation{ClientId: c, Input: linIn{Op: o, Thread: "t", Agent: agent, Token: token, Lease: 900, Call: call, Ret: ret},
			Call: call, Output: linOut{Code: code, Token: outTok, Expires: far}, Return: ret}
	}
	doubleClaim := []porcupine.Operation{op(0, "claim", "a", 0, 1, 2, 0, 1), op(1, "claim", "b", 0, 3, 4, 0, 2)}
	if porcupine.CheckOperations(leaseModel, doubleClaim) {
		t.Error("two successful claims of a live lease passed as linearizable")
	}
	staleToken := []porcupine.Operation{op(0, "claim", "a", 0, 1, 2, 0, 1), op(0, "claim", "a", 0, 3, 4, 0, 2),
		op(0, "done", "a", 1, 5, 6, 0, 0)}
	if porcupine.CheckOperations(leaseModel, staleToken) {
		t.Error("a done with a stale token passed as linearizable")
	}
	good := []porcupine.Operation{op(0, "claim", "a", 0, 1, 2, 0, 1), op(1, "claim", "b", 0, 3, 4, exitConflict, 0),
		op(0, "done", "a", 1, 5, 6, 0, 0), op(1, "claim", "b", 0, 7, 8, exitInvalid, 0)}
	if !porcupine.CheckOperations(leaseModel, good) {
		t.Error("a correct history failed the check")
	}
}
