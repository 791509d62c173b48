// Package crashfs is a FUSE file system for tests that simulate a power
// cut. kill -9 cannot show a missing fsync: the killed process's writes
// stay in the page cache and the next process reads them. crashfs passes
// everything through to a backing directory and keeps, beside it, a model
// of what has been made durable; Cut unmounts and rewrites the backing
// directory to that durable state, forgetting everything else, as a power
// cut would.
//
// It is test infrastructure: only tests and bench/slowfs import it. It
// needs root and /dev/fuse (it mounts with mount(2) directly; no
// fusermount is needed).
//
// The mount is served by goroutines of the process that called Mount. That
// process must not start a child whose exec itself touches the mount:
// exec.Cmd.Dir inside it, or a binary on it. Go's fork keeps a thread in
// clone until the child execs, and meanwhile the runtime may be unable to
// run the goroutine that would answer the child's FUSE request: both hang
// (a known limit of FUSE servers written in Go). Let the child change
// directory itself (sh -c 'cd DIR && ...') or pass it paths instead; or
// serve the mount from another process, as bench/slowfs does.
//
// # The model
//
// In the spirit of the ALICE study (OSDI '14) and CrashMonkey, the model
// is the harshest one POSIX allows:
//
//   - A file's durable content is what it held at its last fsync or
//     fdatasync; a file created under the mount and never synced has empty
//     durable content. Writes, truncates and fallocate become durable only
//     through an fsync or fdatasync of that file (the two are the same
//     here).
//   - A directory's durable entries are its name → inode map as of its last
//     fsync. Creates, links, unlinks, mkdirs, rmdirs and renames change the
//     tree at once but become durable only through an fsync of the
//     directories concerned: a rename needs both directories synced; a
//     rename with only the destination synced leaves the file under both
//     names after a cut, with only the source synced under neither.
//   - At Mount everything present is durable, and SyncAll makes everything
//     durable.
//   - Files are inodes: a file with several durable names has one content
//     for all of them after a cut, as on a real file system; a file
//     unlinked (or renamed over) while one of its names is still durable
//     comes back with its durable content.
//   - Options.SyncDelay is added to every fsync and fdatasync, of files and
//     of directories, to model a slow disk. The backing directory itself is
//     never fsynced: the cost of a flush is SyncDelay plus a FUSE round
//     trip, whatever the disk under the backing directory does.
//
// # What the kernel sends
//
// Measured on Linux 6.18: fsync(2) arrives as FSYNC, fdatasync(2) as FSYNC
// with the datasync flag, and fsync of a directory as FSYNCDIR. sync(2)
// and syncfs(2) send nothing to a FUSE server mounted through /dev/fuse
// (the kernel sends FUSE_SYNCFS only to virtiofs), so the model cannot see
// them: after `sync` the unsynced state is still lost at a cut. Callers
// that need durability must fsync, which is what the model checks. Without
// a writeback cache (crashfs asks for none) every write reaches crashfs
// when it is made; kernel passthrough of reads and writes is turned off
// so that the model sees them.
//
// # Limits
//
// Real file systems keep more than the model. ext4 with data=ordered
// commits its journal every few seconds, in order, and an fsync of one file
// commits everything journalled before it, including the directory entry
// of a new file; it also flushes a file's data before a rename over it
// (auto_da_alloc). Code that passes under crashfs is correct on those too;
// code that fails may happen to work on them, until it does not. The model
// also differs in these ways:
//
//   - A cut keeps none of the unsynced changes; a real disk may keep any
//     subset of them, torn writes included. crashfs does not enumerate
//     those intermediate states.
//   - Metadata (mode, owner, times, extended attributes) is not modelled:
//     Cut recreates each file with its mode and owner as they are at the
//     cut. Times and inode numbers are not preserved.
//   - The backing directory must be one file system (inode numbers are the
//     identity of files), changed only through the mount while mounted.
//   - A directory durably named twice (a directory renamed across
//     directories with only the destination synced) is recreated under the
//     first of its names met in a walk in name order only.
//   - A file created with O_TMPFILE cannot be linked in (EXDEV);
//     copy_file_range is declined (the kernel falls back to reads and
//     writes, which the model sees).
//   - sync(2) and syncfs(2) are not seen (above).
//
// Memory: the model keeps the durable bytes that later writes overwrote
// and, per directory, the names changed since its last fsync; appends and
// new files cost nothing. Cut reads the whole durable tree into memory.
package crashfs
