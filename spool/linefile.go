package spool

import (
	"errors"
	"hash/crc32"
	"io/fs"
	"os"

	"github.com/inbox-dev/inbox"
)

// Line files hold checksummed JSON lines (the event log format, see
// eventlog.go). The thread header and the read cursors are line logs: each
// change appends a whole line, and the last valid line is the current
// value. A change does not fdatasync its line: its event line carries the
// same state, and replay rewrites the line from it after a power cut
// (checkpoint.go); repairs, which have no event line of their own, do.
// Appending allocates no inode and replaces no file, so it is cheaper
// than a rename, and a torn last line (a crash mid-append) is simply not
// valid: readers fall back to the line before it.

// encodeLine turns a JSON object into a checksummed line, newline
// included, in a new buffer.
func encodeLine(body []byte) []byte {
	line := make([]byte, 0, len(body)+crcSuffixLen)
	return sealLine(append(line, body...))
}

// sealLine turns a JSON object into a checksummed line, as encodeLine
// does, in place: body's capacity, when it has room for the checksum,
// becomes the line's.
func sealLine(body []byte) []byte {
	sum := crc32.ChecksumIEEE(body)
	line := append(body[:len(body)-1], `,"crc":"`...)
	const hex = "0123456789abcdef"
	for i := 7; i >= 0; i-- {
		line = append(line, hex[(sum>>(4*uint(i)))&15])
	}
	return append(line, '"', '}', '\n')
}

// readLastLine returns the body of the last valid line of the file at p, or
// nil when the file is missing or holds no valid line.
func readLastLine(p string) ([]byte, error) {
	f, err := openRead(p)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, err
	}
	body, _, err := lastLine(f, fi.Size(), maxLogLine, true, func([]byte) bool { return true })
	return body, err
}

// appendLine appends line to the line log at p, creating it, cutting a torn
// tail first and compacting the log to this one line once it would pass
// max bytes; with sync the line is durable when it returns (a compaction
// always is). It returns where the line starts (what truncating there
// takes back) and whether the log was compacted instead. The caller
// serialises writers of p.
func (s *Store) appendLine(p string, line []byte, max int64, sync bool) (end int64, compacted bool, err error) {
	f, err := openFile(p, os.O_CREATE|os.O_RDWR, s.fileMode)
	if err != nil {
		return 0, false, inbox.Storage(err, "open %s", p)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return 0, false, inbox.Storage(err, "stat %s", p)
	}
	_, end, err = lastLine(f, fi.Size(), maxLogLine, false, func([]byte) bool { return true })
	if err != nil {
		return 0, false, inbox.Storage(err, "read %s", p)
	}
	if end+int64(len(line)) > max {
		return 0, true, publishFile(p, s.tmpDir(), s.fileMode, line)
	}
	if _, err := f.WriteAt(line, end); err != nil {
		f.Truncate(end)
		return 0, false, inbox.Storage(err, "append to %s", p)
	}
	if newEnd := end + int64(len(line)); newEnd < fi.Size() {
		if err := f.Truncate(newEnd); err != nil {
			return 0, false, inbox.Storage(err, "truncate %s", p)
		}
	}
	if s.unsynced || !sync {
		return end, false, nil
	}
	if err := fdatasync(f); err != nil {
		f.Truncate(end)
		return 0, false, inbox.Storage(err, "fsync %s", p)
	}
	return end, false, nil
}
