// Package spool is the directory backend of inbox.Bus: a store of plain
// files that any number of processes on one machine use at once. Open a
// store made by Init and call the operations of inbox.Bus on it.
//
// Messages are immutable JSON files, written to a temp file in tmp/,
// fsynced and atomically renamed into their thread's directory
// (threads/<id>/m-<seq>.json). A thread's header is the last checksummed
// line of its thread.log; its lease is lease.json, read, checked and
// written under the thread's flock (locks/, never unlinked). Every change
// appends one checksummed line to the event log (events/*.jsonl) under
// the log's flock, which fixes the change's event id; blocking calls wait
// on that log through package watcher. The index (index/) that fetch and
// list read is derived from the headers and can be rebuilt from them;
// mailboxes are hard links to message files. docs/FORMAT.md describes
// every file, docs/ARCHITECTURE.md the commit protocol.
//
// # Guarantees
//
//   - Nothing acknowledged is lost: an operation returns only after the
//     files it changed, the directory entries that name them and its event
//     are on disk, so the change survives a kill -9 of any process at any
//     instant and a power cut.
//   - No reader sees a torn message, header or lease: messages appear by
//     rename; header, lease and log lines carry a checksum, and a torn
//     last line is ignored (and cut by the next writer).
//   - At most one live lease per thread, granted atomically across
//     processes, with a token that grows with every grant; holder
//     operations check holder, token and expiry under the same lock as
//     their write.
//   - Event ids are unique and increasing across processes.
//   - A crash between an operation's steps leaves a state the next writer
//     of that thread, or fsck --repair, settles (see loadForWrite and
//     Fsck); a retried operation with an idempotency key finishes it
//     without doing it twice.
//   - Derived data is never taken for truth: a missing or half-rebuilt
//     index is an error (index_missing), never an empty answer.
//
// # Caveats
//
//   - One machine: flock and rename semantics on NFS, SMB and FUSE file
//     systems do not give these guarantees; use the NATS backend for
//     agents on several machines.
//   - Writers of the store are trusted: a process that can write the
//     directory can forge any record (see README, trust model). The store
//     refuses to write through symbolic links inside it, as insurance
//     against accidents.
//   - Presence (agents/, presence/) and lease-time hints are advisory and
//     not synced: a power cut may lose a timestamp, never a change.
package spool

//go:generate go run ../internal/recordgen -out records_gen.go logEvent logHead leaseRecord header msgFile idemRecord formatInfo formatFields formatProbe blobMeta watermark teamRecord
