// Package teamfiles keeps team inbox files in step with the bus, both ways
// (SPEC §11), as a service on inbox.Bus that the daemon runs: seed 002's
// JSONL member inboxes (JSONL) and Claude Code's team inboxes (Claude).
//
// Outbound, each bridge follows the event log and writes every message
// delivered to a team member into that member's file, exactly once and in
// event order: a line or an entry carries the message's id (JSONL) or is
// recognised by sender, timestamp and text (Claude Code's files have no
// ids), so a crash between writing and recording how far it got never
// duplicates. Inbound, lines or entries other processes add are taken in
// through one function (takeIn, common.go): a response to an earlier
// request becomes a reply in the request's thread, an acknowledgment
// settles what it names, anything else is a new thread. Each carries an
// idempotency key derived from what it says, never from where it was
// found, so it is taken in exactly once across restarts and across the
// recipes that rewrite a file; the outbound side never writes a message
// back into the file it came from (a new thread's origin, a reply's
// record in the state).
//
// Which messages go to which file: a message lands in team T's file for
// member M when M is one of its recipients and it was addressed to @T, or
// to "all" by a member of T, or to M by name from another member of T.
//
// The bridges keep their own state beside the files (see docs/FORMAT.md);
// losing it costs a rescan, never a message.
//
// Each bridge is one loop on the goroutine that runs it (bridge.go), the
// only owner of its state: the events of the log and the notifications
// of changed files reach it as messages on channels, and it handles them
// one at a time, so nothing in a bridge is locked. The files, shared with
// other processes, are locked as their formats say: seed 002's flock on
// inbox.lock (jsonl.go), Claude Code's mkdir lock (claude_format.go).
//
// # Guarantees
//
// Nothing inside a team directory is followed or opened blocking when it
// is not what the bridge would have made (SPEC §8): files are opened with
// O_NOFOLLOW and O_NONBLOCK and used only when they are regular files,
// and each directory below the team directory is checked to be a
// directory, not a symlink. A symlink, FIFO, socket or device planted in
// place of an inbox, a lock, errors.log, config.json or a team, members or
// inboxes directory is refused: never written or read through, never
// waited on. The bridge logs an error naming it once and skips that file
// or team (a message it could not write there is written by fsck --repair
// once the file is sound); fsck reports it as team_file_unsafe and
// --repair renames it aside as NAME.bad.
//
// # Caveats
//
// The checks look at each path before it is opened: a directory swapped
// for a symlink between the check and the open is followed (files are
// opened with O_NOFOLLOW, so only directories have this window).
package teamfiles
