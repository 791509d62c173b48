package inbox

import (
	"fmt"
	"time"
)

// HolderStep is what a lease holder's update, done or fail writes: a
// message of Kind (DefaultSummary when its content has none) that moves
// the thread to Status, as an event of EventType; Cmd names the command
// for idempotency.
type HolderStep struct {
	Cmd, Kind, Status, EventType, DefaultSummary string
}

// PrepareHolderStep checks a holder's command (cmd: "update", with status
// in_progress or blocked; "done"; "fail") by agent on thread tid with
// content c, and says what it writes.
func PrepareHolderStep(cmd, agent, tid, status string, c Content) (HolderStep, error) {
	if err := CheckAgentThread(agent, tid); err != nil {
		return HolderStep{}, err
	}
	switch cmd {
	case "update":
		kind, def, err := UpdateKind(status, c)
		return HolderStep{Cmd: cmd, Kind: kind, Status: status, EventType: EventThreadUpdated, DefaultSummary: def}, err
	case "done":
		return HolderStep{Cmd: cmd, Kind: KindResult, Status: StatusDone, EventType: EventThreadDone}, CheckResult(c, false)
	case "fail":
		return HolderStep{Cmd: cmd, Kind: KindResult, Status: StatusFailed, EventType: EventThreadFailed}, CheckResult(c, true)
	}
	return HolderStep{}, Internal(fmt.Errorf("unknown holder command %q", cmd))
}

// Check checks, on the thread's state loaded under the engine's
// compare-and-set, that agent may take the step: the thread has not
// ended, and agent holds its live lease (CheckHolder).
func (st HolderStep) Check(h *Thread, l *Lease, agent string, token int64, now time.Time) error {
	if IsTerminal(h.Status) {
		return InvalidState("thread %s is already %s; it cannot move to %s", h.ThreadID, h.Status, st.Status)
	}
	return CheckHolder(h, l, agent, token, now)
}
