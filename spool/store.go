package spool

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/google/renameio/v2"

	"github.com/inbox-dev/inbox"
	"github.com/inbox-dev/inbox/index"
	"github.com/inbox-dev/inbox/internal/durable"
	"github.com/inbox-dev/inbox/internal/safefile"
)

// FormatVersion is the on-disk format this package reads and writes.
// Version 2 made the event log the one commit point of durability
// (docs/FORMAT.md); version 1 stores are converted when opened.
const FormatVersion = 2

// formatName identifies an inbox store in inbox.json.
const formatName = "inbox-store"

// Layout of a store directory (docs/FORMAT.md has the whole picture).
const (
	formatFile   = "inbox.json"
	tmpDirName   = "tmp"
	threadsDir   = "threads"
	eventsDir    = "events"
	indexDirName = "index"
	locksDir     = "locks"
	idemDir      = "idem"
	archiveDir   = "archive"
	mailboxDir   = "mailbox"
	tasksDir     = "tasks"
	agentsDir    = "agents"
	presenceDir  = "presence"
	// intakeDir is where the daemon looks for dropped descriptors by
	// default; init makes it so that a first drop works before any
	// daemon has run.
	intakeDir = "intake"
)

type formatInfo struct {
	Format    string `json:"format"`
	Version   int    `json:"version"`
	Shared    bool   `json:"shared"`
	CreatedAt string `json:"created_at"`
	// MaxBlob is the largest body, payload or task output the store
	// takes, in bytes (inbox init --max-blob); stores made before it
	// have none, which means inbox.DefaultMaxBlob.
	MaxBlob int64 `json:"max_blob,omitempty"`
}

// formatFields is inbox.json as read, its version kept raw so that a bad
// one can be quoted.
type formatFields struct {
	Format    string          `json:"format"`
	Version   json.RawMessage `json:"version"`
	Shared    bool            `json:"shared"`
	CreatedAt string          `json:"created_at"`
	MaxBlob   int64           `json:"max_blob,omitempty"`
}

// formatProbe is the part of inbox.json read first: format and version
// only, so that a store whose other members are damaged is still named
// as a store.
type formatProbe struct {
	Format  string          `json:"format"`
	Version json.RawMessage `json:"version"`
}

// Options tune a Store. The zero value is what the CLI uses.
type Options struct {
	// Now is the clock; nil means time.Now.
	Now func() time.Time
	// Source names the writer in events ("cli" when empty).
	Source string
	// SegmentBytes is the size at which the event log starts a new
	// segment; 0 means DefaultSegmentBytes.
	SegmentBytes int64
	// Unsynced skips every fsync. It exists to generate large stores for
	// benchmarks quickly; a crash or power loss can then lose or tear
	// anything. Never use it for a store that matters.
	Unsynced bool
	// CheckpointEvery is how many events a writer lets pass the durable
	// watermark before it checkpoints (0: 256; negative: never, so that a
	// crash of the machine replays the whole live log — for tests on file
	// systems that do not model syncfs).
	CheckpointEvery int
	// LockTimeout bounds every wait for one of the store's locks; 0
	// means DefaultLockTimeout.
	LockTimeout time.Duration
	// Recover opens, for Fsck, a store that Open refuses for a file
	// planted where it reads first (SPEC §8): inbox.json, or a lock file
	// that opening after a restart takes. The store is then taken as
	// the rest of it shows (fsck_planted.go), writes are refused, and Fsck
	// reports the planted file; its repair sets it aside and writes what
	// it stood for. fsck opens stores this way.
	Recover bool
}

// DefaultSegmentBytes is the event-log segment size bound.
const DefaultSegmentBytes = 16 << 20

// Store is an inbox store: a directory tree of threads, messages, leases,
// read cursors, an event log and a derived index. A Store holds no open
// files between calls. It is safe for use by many processes at once, and
// its methods for concurrent use by many goroutines (inbox.Bus): what a
// Store value holds is fixed when it is opened, but for the watermark it
// last saw (atomic). The store's locks are flocks, each taken through an
// open file of its own, so they exclude goroutines of one process as
// they exclude processes; upkeep that holds them all works on a view of
// the Store of its own (lockAllToWrite).
//
// One caveat: a Fsck with repair that finds or removes a planted link
// (links.go), or writes a planted inbox.json anew (fsck_planted.go), sets
// the Store's refusal of writes without synchronisation, so such a repair
// should not run beside other calls on the same value.
type Store struct {
	// Steps gives Update, Done, Fail and the team changes (holderMessage,
	// changeTeam).
	inbox.Steps
	dir      string
	fileMode os.FileMode
	dirMode  os.FileMode
	now      func() time.Time
	source   string
	log      *eventLog
	idx      *index.Index
	unsynced bool
	linkErr  error         // a top-level directory is a symbolic link (see links.go)
	markID   *atomic.Int64 // durable.json's event id as this Store last saw it (checkpoint.go)
	// checkpointEvery is Options.CheckpointEvery, defaulted.
	checkpointEvery int
	lockTimeout     time.Duration // Options.LockTimeout
	maxBlob         int64         // inbox.json's max_blob, defaulted
	// format is inbox.json as Open read it, or as the store showed it
	// when it was planted (formatProven; Options.Recover): what a
	// repair writes in place of a planted one.
	format       formatInfo
	formatProven bool
}

// Store is a Bus on a directory.
var _ inbox.Bus = (*Store)(nil)

// RunnerLog is the file detached task runners log to.
func (s *Store) RunnerLog() string { return filepath.Join(s.dir, tasksDir, "runner.log") }

// DefaultIntake is the intake directory the daemon reads when it is
// given none: intake/ in the store, which init creates.
func (s *Store) DefaultIntake() string { return filepath.Join(s.dir, intakeDir) }

// Init creates a store at dir, or checks the one already there. shared makes
// files 0660 and directories 0770 (group-shared) instead of 0600/0700, and
// sets the process umask to 007 (see shareUmask), as Open does for a shared
// store. It reports whether it created the store.
func Init(dir string, shared bool) (created bool, err error) {
	return InitWith(dir, InitOptions{Shared: shared})
}

// InitOptions are what a store is made with.
type InitOptions struct {
	// Shared makes the store group-shared (see Init).
	Shared bool
	// MaxBlob is the largest body, payload or task output the store
	// takes, in bytes; 0 means inbox.DefaultMaxBlob. It is recorded in
	// inbox.json, so that every process using the store applies it.
	MaxBlob int64
}

// InitWith is Init with options. On a store that exists already it
// changes nothing, but for a MaxBlob that differs from the store's: that
// becomes the store's maximum (inbox.json rewritten whole), for every
// process that opens it from then on.
func InitWith(dir string, o InitOptions) (created bool, err error) {
	if dir == "" {
		return false, inbox.Invalid("db", "is empty")
	}
	if o.MaxBlob < 0 {
		return false, inbox.Invalid("max_blob", "is %d: a size must be at least one byte", o.MaxBlob)
	}
	if info, err := readFormat(dir); err == nil {
		if o.MaxBlob == 0 || o.MaxBlob == info.MaxBlob {
			return false, nil
		}
		info.MaxBlob = o.MaxBlob
		fileMode, _ := modes(info.Shared)
		return false, writeFormat(dir, fileMode, info)
	} else if !errors.Is(err, inbox.ErrNotInitialized) {
		return false, err
	}
	shared := o.Shared
	maxBlob := o.MaxBlob
	if maxBlob == 0 {
		maxBlob = inbox.DefaultMaxBlob
	}
	if entries, err := os.ReadDir(dir); err == nil && len(entries) > 0 {
		return false, inbox.Invalid("db", "%s exists, is not empty and holds no inbox store; choose another {db}", dir)
	}
	fileMode, dirMode := modes(shared)
	if shared {
		shareUmask()
	}
	parent := filepath.Dir(filepath.Clean(dir))
	if err := os.MkdirAll(parent, 0o755); err != nil {
		return false, inbox.Storage(err, "create %s", parent)
	}
	if err := os.Mkdir(dir, dirMode); err != nil && !errors.Is(err, fs.ErrExist) {
		return false, inbox.Storage(err, "create store %s", dir)
	}
	if err := os.Chmod(dir, dirMode); err != nil {
		return false, inbox.Storage(err, "chmod %s", dir)
	}
	for _, sub := range []string{tmpDirName, threadsDir, eventsDir, indexDirName, locksDir, idemDir, intakeDir} {
		p := filepath.Join(dir, sub)
		if err := os.Mkdir(p, dirMode); err != nil && !errors.Is(err, fs.ErrExist) {
			return false, inbox.Storage(err, "create %s", p)
		}
		if err := os.Chmod(p, dirMode); err != nil {
			return false, inbox.Storage(err, "chmod %s", p)
		}
	}
	if err := index.Init(filepath.Join(dir, indexDirName), dirMode); err != nil {
		return false, inbox.Storage(err, "create index")
	}
	seg := filepath.Join(dir, eventsDir, segmentName(1))
	f, err := openFile(seg, os.O_CREATE|os.O_WRONLY, fileMode)
	if err != nil {
		return false, inbox.Storage(err, "create event log")
	}
	if err := f.Close(); err != nil {
		return false, inbox.Storage(err, "create event log")
	}
	w := watermark{BootID: bootID()}
	if err := publishFile(filepath.Join(dir, durableFile), filepath.Join(dir, tmpDirName), fileMode, w.appendJSON(nil)); err != nil {
		return false, err
	}
	for _, d := range []string{filepath.Join(dir, eventsDir), filepath.Join(dir, indexDirName), dir, parent} {
		if err := syncDir(d); err != nil {
			return false, err
		}
	}
	info := formatInfo{Format: formatName, Version: FormatVersion, Shared: shared, CreatedAt: inbox.FormatTime(time.Now()), MaxBlob: maxBlob}
	// inbox.json goes last: its presence means the store is complete.
	return true, writeFormat(dir, fileMode, &info)
}

// writeFormat writes inbox.json of the store at dir, durably.
func writeFormat(dir string, fileMode os.FileMode, info *formatInfo) error {
	if err := publishFile(filepath.Join(dir, formatFile), filepath.Join(dir, tmpDirName), fileMode, info.appendJSON(nil)); err != nil {
		return err
	}
	return syncDir(dir)
}

// ReadMaxBlob returns the maximum of the store at dir (see
// Store.MaxBlob) without opening it.
func ReadMaxBlob(dir string) (int64, error) {
	info, err := readFormat(dir)
	if err != nil {
		return 0, err
	}
	if info.MaxBlob == 0 {
		return inbox.DefaultMaxBlob, nil
	}
	return info.MaxBlob, nil
}

func modes(shared bool) (file, dir os.FileMode) {
	if shared {
		return 0o660, 0o770
	}
	return 0o600, 0o700
}

func readFormat(dir string) (*formatInfo, error) {
	data, err := readFile(filepath.Join(dir, formatFile))
	if errors.Is(err, syscall.ENOTDIR) {
		return nil, &inbox.Error{Code: "invalid_input", Field: "db", Err: inbox.ErrInvalidInput, Cause: err,
			Rule: fmt.Sprintf("%s is not a directory (it or a folder above it is a file): name a directory for the store", dir)}
	}
	if errors.Is(err, fs.ErrNotExist) {
		return nil, &inbox.Error{Code: "store_not_initialized", Err: inbox.ErrNotInitialized, Cause: err,
			Rule: fmt.Sprintf("no inbox store at %s (create it with inbox init)", dir)}
	}
	var nr *safefile.NotRegularError
	if errors.As(err, &nr) {
		return nil, &inbox.Error{Code: "not_a_store_file", Err: inbox.ErrFormat, Cause: err,
			Rule: nr.Path + " is " + nr.What + ", not the format file inbox wrote; inbox neither reads nor writes through it " +
				"(inbox fsck --repair sets it aside and writes inbox.json anew from what the store shows)"}
	}
	if err != nil {
		return nil, inbox.Storage(err, "read %s", formatFile)
	}
	// The probe looks at format and version only, so that a store whose
	// other members are damaged is still named as a store.
	var probe formatProbe
	if err := probe.decodeJSON(data); err != nil || probe.Format != formatName {
		return nil, &inbox.Error{Code: "unsupported_format", Err: inbox.ErrFormat,
			Rule: fmt.Sprintf("%s is not an inbox store format file", filepath.Join(dir, formatFile))}
	}
	version := strings.TrimSpace(string(probe.Version))
	var f formatFields
	err = f.decodeJSON(data)
	// version is a valid JSON value: ParseInt accepts exactly its integers.
	n, verr := strconv.ParseInt(version, 10, 0)
	if err != nil || verr != nil {
		return nil, &inbox.Error{Code: "unsupported_format", Err: inbox.ErrFormat, Rule: fmt.Sprintf(
			"store %s: inbox.json has format version %s, which is not a version number; this inbox reads version %d",
			dir, orNone(version), FormatVersion)}
	}
	info := formatInfo{Format: f.Format, Version: int(n), Shared: f.Shared, CreatedAt: f.CreatedAt, MaxBlob: f.MaxBlob}
	if info.Version > FormatVersion {
		return nil, &inbox.Error{Code: "unsupported_format", Err: inbox.ErrFormat,
			Rule: fmt.Sprintf("store %s has format version %d; this inbox reads version %d (upgrade inbox)", dir, info.Version, FormatVersion)}
	}
	if info.Version < 1 {
		return nil, &inbox.Error{Code: "unsupported_format", Err: inbox.ErrFormat,
			Rule: fmt.Sprintf("store %s has format version %d, which no inbox wrote; inbox.json is damaged", dir, info.Version)}
	}
	if info.MaxBlob < 0 {
		return nil, &inbox.Error{Code: "unsupported_format", Err: inbox.ErrFormat,
			Rule: fmt.Sprintf("store %s has max_blob %d, which is not a size; inbox.json is damaged (inbox init --max-blob SIZE sets it again)", dir, info.MaxBlob)}
	}
	return &info, nil
}

// Open opens the store at dir, which must have been created by Init.
func Open(ctx context.Context, dir string, opts Options) (*Store, error) {
	info, err := readFormat(dir)
	formatErr := err
	if err != nil {
		if !opts.Recover || !notAStoreFile(err) {
			return nil, err
		}
		info = shownFormat(dir)
	}
	fileMode, dirMode := modes(info.Shared)
	if info.Shared {
		shareUmask()
	}
	s := &Store{dir: dir, fileMode: fileMode, dirMode: dirMode, now: opts.Now, source: opts.Source, unsynced: opts.Unsynced,
		checkpointEvery: opts.CheckpointEvery, lockTimeout: opts.LockTimeout, maxBlob: info.MaxBlob, markID: new(atomic.Int64),
		format: *info, formatProven: formatErr != nil}
	s.Steps = inbox.Steps{Holder: s.holderMessage, Team: s.changeTeam, Append: s.reply}
	if s.maxBlob == 0 {
		s.maxBlob = inbox.DefaultMaxBlob
	}
	if s.checkpointEvery == 0 {
		s.checkpointEvery = checkpointEvery
	}
	if s.now == nil {
		s.now = time.Now
	}
	if s.source == "" {
		s.source = "cli"
	}
	seg := opts.SegmentBytes
	if seg <= 0 {
		seg = DefaultSegmentBytes
	}
	s.log = &eventLog{dir: filepath.Join(dir, eventsDir), lockPath: filepath.Join(dir, locksDir, "events.lock"),
		tmpDir: filepath.Join(dir, tmpDirName), segBytes: seg, fileMode: fileMode, unsynced: opts.Unsynced,
		lockTimeout: opts.LockTimeout}
	s.idx = index.Open(filepath.Join(dir, indexDirName), fileMode, dirMode, indexLayout)
	// Writes refuse to go through a planted link; reads and fsck (which
	// removes it) still work.
	s.linkErr = s.checkNoLinks()
	if formatErr != nil {
		s.linkErr = formatErr // until Fsck's repair writes inbox.json
	}
	if !s.unsynced {
		if err := s.openDurable(ctx, info.Version); err != nil {
			if !opts.Recover || !notAStoreFile(err) {
				return nil, err
			}
			s.linkErr = err // a planted lock: the repair sets it aside
		}
	}
	return s, nil
}

// indexLayout buckets the statuses that grow without bound: the terminal
// ones everywhere, and pending (a backlog can be large) in the status
// tree only, since fetch reads an agent's pending markers in full.
var indexLayout = index.Layout{
	Sharded:         []string{inbox.StatusPending},
	ShardedAssigned: []string{inbox.StatusDone, inbox.StatusFailed, inbox.StatusCancelled},
}

func (s *Store) tmpDir() string              { return filepath.Join(s.dir, tmpDirName) }
func (s *Store) threadDir(tid string) string { return filepath.Join(s.dir, threadsDir, tid) }
func (s *Store) threadsRoot() string         { return filepath.Join(s.dir, threadsDir) }
func (s *Store) archivedDir(tid string) string {
	return filepath.Join(s.dir, archiveDir, threadsDir, tid)
}
func (s *Store) lockFile(name string) string { return filepath.Join(s.dir, locksDir, name) }
func msgName(seq int) string                 { return fmt.Sprintf("m-%08d.json", seq) }
func cursorName(agent string) string         { return "cursor-" + agent + ".log" }
func (s *Store) idemPath(hash string) string { return filepath.Join(s.dir, idemDir, hash+".json") }
func threadIdemName(hash string) string      { return "idem-" + hash + ".json" }

// publishFile writes data to path atomically: a temp file in tmpDir,
// fsync, rename. The caller fsyncs path's directory when the rename must
// survive power loss (see syncSet).
func publishFile(path, tmpDir string, mode os.FileMode, data []byte) error {
	flushes.Add(1) // renameio fsyncs the file
	pf, err := renameio.NewPendingFile(path, renameio.WithTempDir(tmpDir), renameio.WithStaticPermissions(mode))
	if err != nil {
		return inbox.Storage(err, "write %s", path)
	}
	defer pf.Cleanup()
	if _, err := pf.Write(data); err != nil {
		return inbox.Storage(err, "write %s", path)
	}
	if err := pf.CloseAtomicallyReplace(); err != nil {
		return inbox.Storage(err, "write %s", path)
	}
	return nil
}

// syncDir fsyncs a directory so that creations, renames and removals in it
// survive power loss.
func syncDir(dir string) error {
	flushes.Add(1)
	return inbox.Storage(durable.SyncDir(dir), "fsync directory %s", dir)
}

// flushes counts the fsyncs, fdatasyncs and syncfs calls this process
// made on stores: what a write waits on (tests hold it to one per
// acknowledged write).
var flushes atomic.Int64

// syncSet collects directories to fsync once at the end of an operation.
type syncSet []string

func (ss *syncSet) add(dirs ...string) {
	for _, d := range dirs {
		if !slices.Contains(*ss, d) {
			*ss = append(*ss, d)
		}
	}
}

// flush fsyncs the directories concurrently: each fsync ends in a device
// cache flush, and concurrent flushes are merged by the block layer.
func (ss syncSet) flush() error {
	return durable.Concurrently(len(ss), func(i int) error { return syncDir(ss[i]) })
}

func orNone(s string) string {
	if s == "" {
		return "(none)"
	}
	return s
}
