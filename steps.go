package inbox

import "context"

// Steps implements the operations of Bus that are one engine operation
// under several names: a holder's update, done and fail (one HolderStep,
// PrepareHolderStep's cmd), a team's create, add and remove (one
// TeamChange, named by its event type) and a reply (a message appended). An engine embeds Steps, set
// to its own two operations, instead of writing the six methods again.
type Steps struct {
	// Holder commits a holder's step cmd ("update", "done" or "fail").
	Holder func(ctx context.Context, cmd, agent, tid, status string, token int64, c Content) (*Result, error)
	// Team commits a team change of event type evType.
	Team func(ctx context.Context, by, name string, members []string, evType string) (*Team, error)
	// Append adds a message of kind from from to thread tid, as command
	// cmd (its idempotency scope).
	Append func(ctx context.Context, cmd, tid, from, to, kind string, c Content) (*Result, error)
}

// Reply appends a message of kind (ReplyKinds; PrepareReply) to a live
// thread; anyone may reply.
func (s Steps) Reply(ctx context.Context, from, to, tid, kind string, c Content) (*Result, error) {
	kind, err := PrepareReply(from, kind, c)
	if err != nil {
		return nil, err
	}
	return s.Append(ctx, "reply", tid, from, to, kind, c)
}

// Update lets the holder post progress (status in_progress) or a blocked
// question (status blocked, summary required).
func (s Steps) Update(ctx context.Context, agent, tid, status string, token int64, c Content) (*Result, error) {
	return s.Holder(ctx, "update", agent, tid, status, token, c)
}

// Done completes the thread with its result; the lease is released.
func (s Steps) Done(ctx context.Context, agent, tid string, token int64, c Content) (*Result, error) {
	return s.Holder(ctx, "done", agent, tid, "", token, c)
}

// Fail marks the thread failed; the lease is released.
func (s Steps) Fail(ctx context.Context, agent, tid string, token int64, c Content) (*Result, error) {
	return s.Holder(ctx, "fail", agent, tid, "", token, c)
}

// CreateTeam creates a team with its first members.
func (s Steps) CreateTeam(ctx context.Context, by, name string, members []string) (*Team, error) {
	return s.Team(ctx, by, name, members, EventTeamCreated)
}

// AddMembers adds members to a team.
func (s Steps) AddMembers(ctx context.Context, by, name string, members []string) (*Team, error) {
	return s.Team(ctx, by, name, members, EventTeamMembersAdded)
}

// RemoveMembers removes members from a team.
func (s Steps) RemoveMembers(ctx context.Context, by, name string, members []string) (*Team, error) {
	return s.Team(ctx, by, name, members, EventTeamMembersRemoved)
}
