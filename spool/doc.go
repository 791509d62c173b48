// Package spool is the directory backend of inbox.Bus: a store of plain
// files that any number of processes on one machine use at once. Open a
// store made by Init and call the operations of inbox.Bus on it.
//
// Messages are immutable JSON files, written to a temp file in tmp/ and
// atomically renamed into their thread's directory
// (threads/<id>/m-<seq>.json). A thread's header is the last checksummed
// line of its thread.log; its lease is lease.json, read, checked and
// written under the thread's flock (locks/, never unlinked). Every change
// appends one checksummed line to the event log (events/*.jsonl) under
// the log's flock, which fixes the change's event id (a batch of changes
// writes its lines with one write); blocking calls wait on that log
// through package watcher. The index (index/) that fetch and list read is
// derived from the headers and can be rebuilt from them; mailboxes are
// hard links to message files. docs/FORMAT.md describes every file,
// docs/ARCHITECTURE.md the commit protocol.
//
// The event log is the commit point of durability. A change's line
// carries everything needed to redo it (the header after it, the message,
// the idempotency record, the task), and it is the one thing a writer
// waits to reach the disk: message files, header lines, lease files,
// index markers and mailbox links are materialised through the page
// cache without fsyncs of their own. Once its lines are written, a writer
// releases the log and flushes with group commit (groupcommit.go): under
// locks/flush.lock it fdatasyncs the segment, unless a flush that began
// after its write already covered its lines, so that writers at the same
// moment share one fdatasync. A checkpoint (checkpoint.go: the daemon's
// every few seconds, or a writer's once the log is 256 events past the
// last) is one syncfs of the store's file system, after which durable.json
// records up to which event the materialised files are on disk, and under
// which boot of the machine. Opening a store after the machine crashed or
// restarted replays the log past that mark and rewrites the files the
// lost page cache held. Blobs (content over 64 MiB, or not text) are the
// exception: they are fsynced, and linked into blobs/ with the directory
// fsynced, before the change's line is written.
//
// # Guarantees
//
//   - Nothing acknowledged is lost: an operation returns only after its
//     event line is on disk (fdatasynced, by itself or by a concurrent
//     writer's flush), and that line redoes every file the change wrote,
//     so the change survives a kill -9 of any process at any instant and
//     a power cut.
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
