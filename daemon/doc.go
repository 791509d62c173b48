// Package daemon is `inbox daemon`: the long-running service that turns
// descriptor files dropped into an intake directory into threads (SPEC §6),
// writes their .result and .outcome files, and expires leases.
//
// One goroutine owns all state. It wakes on fsnotify events for the intake
// directory, its parent (so that an intake directory moved away, deleted
// or replaced is noticed at once and watched anew) and the event log, on a
// slow sweep timer (the safety net when notifications are lost) and on the
// next lease expiry.
//
// # Guarantees
//
//   - Exactly once: a descriptor is dispatched with an idempotency key made
//     of its name, the SHA-256 of its content and the identity of the file
//     (device, inode, change time), and only after the thread is committed
//     does it get its .result and become .processed. A crash at any point
//     leaves it pending, and the retry finds the thread the first attempt
//     made instead of making a second one; a new drop under the same name
//     is a new file, hence a new key. The thread records the descriptor's
//     name and hash.
//   - Every descriptor ends as NAME.task.json.processed or .failed, each
//     with a .result; .outcome follows when the thread reaches a terminal
//     status, also for threads that finished while the daemon was down.
//   - A burst is processed in full, in name order; files present at start
//     are processed at start.
//   - A descriptor is answered under its own name (NAME.task.json.result,
//     .processed, .failed, .outcome) whenever NAME.task.json.processed is
//     a legal file name (at most 255 bytes): the daemon's temp files have
//     short names of their own. Only a longer name is answered under the
//     SHA-256 of the name (FileBase).
//   - An intake directory moved away, deleted or replaced while the
//     daemon lists it is no error: the sweep starts again on the
//     directory at the path now. A batch's files are written, renamed and
//     fsynced in one directory, the one it opened first.
//
// # Caveats
//
// A descriptor that is not valid JSON and was modified less than two
// seconds ago is left for a later sweep (it may still be being written);
// writers should write a temp file and rename it into place.
package daemon
