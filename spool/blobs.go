package spool

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"syscall"

	"github.com/inbox-dev/inbox"
	"github.com/inbox-dev/inbox/internal/jsonrec"

	"crypto/sha256"
	"encoding/hex"
)

// Large content (SPEC 4 "Size"). A body, payload or task output of up to
// MaxInline bytes is stored inline in its message. Beyond that, or when
// the caller asks, it is stored as a blob: a file blobs/<sha256> of the
// store, named by the SHA-256 of its content, and the message carries an
// artifact of kind "blob" that points at it:
//
//	{"path": "/abs/store/blobs/<sha256>", "kind": "blob",
//	 "metadata_json": {"blob": "blobs/<sha256>", "field": "body",
//	                   "sha256": "<sha256>", "bytes": N}}
//
// A blob's content is first staged (a temp file in tmp/, or a file the
// caller owns on the store's file system, such as a task's captured
// output), fsynced and hashed; the message's commit links it into blobs/
// before the commit point, under the thread's lock, so a blob that no
// message names can only be left by a crash, and fsck --repair (which
// holds every lock) removes it. Blobs are immutable and shared: the same
// content is stored once.

const blobsDir = "blobs"

// staged is spool's handle on a staged blob.
type staged struct {
	src  string // the staged file
	temp bool   // src is a temp file of the store's, removed by discard
}

func stagedOf(b *inbox.Blob) *staged {
	if st, ok := b.Staged.(*staged); ok {
		return st
	}
	return &staged{}
}

// OpenBlob opens a blob by its reference (Blob.Ref, the "blob" of its
// artifact's metadata).
func (s *Store) OpenBlob(ctx context.Context, ref string) (io.ReadCloser, error) {
	p, err := s.blobPath(ref)
	if err != nil {
		return nil, err
	}
	f, err := openRead(p)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, inbox.NotFound("blob %s not found", ref)
	}
	if err != nil {
		return nil, inbox.Storage(err, "open blob %s", ref)
	}
	return f, nil
}

// blobPath is where a blob's content is read: the store-relative path in
// its artifact's metadata ("blob"), resolved in the store.
func (s *Store) blobPath(rel string) (string, error) {
	name, ok := cutPrefix(rel, blobsDir+"/")
	if !ok || !isHex64(name) {
		return "", inbox.Invalid("blob", "%q does not name a blob (want blobs/ and 64 hex digits)", rel)
	}
	return filepath.Join(s.dir, blobsDir, name), nil
}

func cutPrefix(s, p string) (string, bool) {
	if len(s) < len(p) || s[:len(p)] != p {
		return s, false
	}
	return s[len(p):], true
}

func isHex64(s string) bool {
	if len(s) != 64 {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f') {
			return false
		}
	}
	return true
}

// Bounds (SPEC §8 "Input without end is bounded"). A body, payload or
// task output larger than the store's maximum (inbox.json's max_blob,
// inbox.DefaultMaxBlob unless init said otherwise) or than its file
// system can take is refused (inbox.TooLarge: invalid input, exit 30),
// and nothing of it stays behind. StageBlob reads a stream only up to
// the limit and one byte more, so an endless source (/dev/zero, a FIFO
// that never closes) ends in a refusal, not in a full disk.
//
// The free space is the file system's space available to the store's
// user (statfs), less a margin kept for the store's own writes (its
// log, its records): freeMargin. Content under largeContent is not
// weighed against it (a write on a full disk then fails as a storage
// error), so that small messages cost no statfs.

// MaxBlob is the largest body, payload or task output the store takes,
// in bytes: what inbox init --max-blob recorded, else
// inbox.DefaultMaxBlob. Whatever captures content for a message (a task
// runner capturing output) stops at it: past MaxBlob bytes the content
// will be refused.
func (s *Store) MaxBlob() int64 { return s.maxBlob }

// maxBlobWhat names the store's maximum in a refusal.
const maxBlobWhat = "this store's maximum (max_blob)"

// CheckSize refuses n bytes of field, held in memory and to be stored in
// its message, when they are over the store's maximum or the room on its
// file system (inline content is written twice: the message's file and
// its log line). It is what inbox.NewMessage asks (inbox.SizeChecker).
func (s *Store) CheckSize(field string, n int64) error {
	if n > s.maxBlob {
		return inbox.TooLarge(field, n, s.maxBlob, maxBlobWhat, "raise the maximum (inbox init --max-blob SIZE)")
	}
	if n < largeContent {
		return nil
	}
	if room, sp, ok := s.room(); ok && 2*n > room {
		return tooLargeForDisk(field, n, room/2, sp)
	}
	return nil
}

// CheckSize bounds the content NewMessage is given (see Store.CheckSize).
func (b blobStager) CheckSize(field string, n int64) error { return b.s.CheckSize(field, n) }

// statfs is syscall.Statfs; tests replace it to play a full disk.
var statfs = syscall.Statfs

// fsSpace is what statfs says of the store's file system.
type fsSpace struct{ free, total int64 }

// freeMargin is the space kept free on the store's file system: 64 MiB,
// or a twentieth of a file system smaller than 1.25 GiB.
func freeMargin(total int64) int64 { return min(64<<20, total/20) }

// roomFor is how many bytes content may take on a file system with the
// given space: what is free less the margin (never below zero).
func roomFor(sp fsSpace) int64 { return max(0, sp.free-freeMargin(sp.total)) }

// room is the room on the store's file system for content (see roomFor);
// ok is false when statfs fails, and nothing is then refused for space.
func (s *Store) room() (room int64, sp fsSpace, ok bool) {
	var st syscall.Statfs_t
	if err := statfs(s.tmpDir(), &st); err != nil {
		return 0, fsSpace{}, false
	}
	bs := int64(st.Bsize)
	sp = fsSpace{free: int64(st.Bavail) * bs, total: int64(st.Blocks) * bs}
	return roomFor(sp), sp, true
}

func tooLargeForDisk(field string, n, room int64, sp fsSpace) error {
	return inbox.TooLarge(field, n, room, fmt.Sprintf("the room on the store's file system (%s free, less %s kept free)",
		inbox.FormatSize(sp.free), inbox.FormatSize(freeMargin(sp.total))), "free space on it")
}

// blobLimit is how many bytes a blob staged now may have: the store's
// maximum, or less when the file system has less room; tooLarge is the
// refusal of more.
func (s *Store) blobLimit(field string) (limit int64, tooLarge func(n int64) error) {
	limit = s.maxBlob
	tooLarge = func(n int64) error {
		return inbox.TooLarge(field, n, s.maxBlob, maxBlobWhat, "raise the maximum (inbox init --max-blob SIZE)")
	}
	if room, sp, ok := s.room(); ok && room < limit {
		limit = room
		tooLarge = func(n int64) error { return tooLargeForDisk(field, n, room, sp) }
	}
	return limit, tooLarge
}

// StageBlob copies r into a staged blob (a temp file in the store, fsynced
// and hashed on the way). It reads at most one byte past the store's
// limit (see MaxBlob and the free space): content over it is refused with
// inbox.TooLarge, its temp file removed, the rest of r left unread.
func (s *Store) StageBlob(ctx context.Context, field string, r io.Reader) (*inbox.Blob, error) {
	limit, tooLarge := s.blobLimit(field)
	f, err := os.CreateTemp(s.tmpDir(), "blob-*")
	if err != nil {
		return nil, inbox.Storage(err, "stage blob")
	}
	b := &inbox.Blob{Field: field, Staged: &staged{src: f.Name(), temp: true}}
	ok := false
	defer func() {
		if !ok {
			f.Close()
			os.Remove(f.Name())
		}
	}()
	// The lock tells the sweep of tmp/ that a writer is alive, however
	// long its source pauses (see sweepTemps).
	syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
	if err := f.Chmod(s.fileMode); err != nil {
		return nil, inbox.Storage(err, "stage blob")
	}
	d := sha256.New()
	n, err := io.Copy(io.MultiWriter(f, d), io.LimitReader(r, limit+1))
	if err != nil {
		return nil, inbox.Storage(err, "stage blob")
	}
	if n > limit {
		return nil, tooLarge(-1)
	}
	if !s.unsynced {
		flushes.Add(1)
		if err := f.Sync(); err != nil {
			return nil, inbox.Storage(err, "fsync blob")
		}
	}
	if err := f.Close(); err != nil {
		return nil, inbox.Storage(err, "stage blob")
	}
	b.SHA256, b.Size, ok = hex.EncodeToString(d.Sum(nil)), n, true
	return b, nil
}

// AdoptBlob stages the file at path, which the caller owns and which
// must be on the store's file system and no longer change (a task's
// captured output): it is fsynced and hashed, and linked into the store
// when the message commits. The caller removes it afterwards.
func (s *Store) AdoptBlob(ctx context.Context, field, path string) (*inbox.Blob, error) {
	f, err := openRead(path)
	if err != nil {
		return nil, inbox.Storage(err, "read %s", path)
	}
	defer f.Close()
	if fi, err := f.Stat(); err == nil && fi.Size() > s.maxBlob {
		return nil, inbox.TooLarge(field, fi.Size(), s.maxBlob, maxBlobWhat, "raise the maximum (inbox init --max-blob SIZE)")
	}
	d := sha256.New()
	n, err := io.Copy(d, f)
	if err != nil {
		return nil, inbox.Storage(err, "read %s", path)
	}
	if !s.unsynced {
		flushes.Add(1)
		if err := f.Sync(); err != nil {
			return nil, inbox.Storage(err, "fsync %s", path)
		}
	}
	return &inbox.Blob{Field: field, SHA256: hex.EncodeToString(d.Sum(nil)), Size: n, Staged: &staged{src: path}}, nil
}

// discard removes a staged blob's temp file (the committed blob, if any,
// is another link to it and stays).
func discard(b *inbox.Blob) {
	if b != nil && stagedOf(b).temp {
		os.Remove(stagedOf(b).src)
	}
}

// artifact is the artifact a message carries for the blob.
func (s *Store) blobArtifact(b *inbox.Blob) inbox.ArtifactInput {
	abs := s.dir
	if a, err := filepath.Abs(s.dir); err == nil {
		abs = a
	}
	meta := jsonrec.Fields{}.Str("blob", b.Ref()).Str("field", b.Field).Str("sha256", b.SHA256).Num("bytes", b.Size).JSON()
	return inbox.ArtifactInput{Path: filepath.Join(abs, blobsDir, b.SHA256), Kind: "blob", MetadataJSON: string(meta)}
}

// linkBlob makes b part of the store, before the commit point of the
// message that names it: blobs/<sha256> becomes a link to its staged
// file. It returns whether it created the name (to undo on failure).
func (s *Store) linkBlob(b *inbox.Blob) (created bool, err error) {
	dir := filepath.Join(s.dir, blobsDir)
	dst := filepath.Join(dir, b.SHA256)
	src := stagedOf(b).src
	err = os.Link(src, dst)
	if errors.Is(err, fs.ErrNotExist) {
		if _, serr := os.Stat(src); serr != nil {
			return false, inbox.Storage(serr, "blob staged at %s is gone (was the store repaired meanwhile? retry)", src)
		}
		if err := os.Mkdir(dir, s.dirMode); err != nil && !errors.Is(err, fs.ErrExist) {
			return false, inbox.Storage(err, "create %s", dir)
		}
		err = os.Link(src, dst)
	}
	if errors.Is(err, fs.ErrExist) {
		// The same content is stored already (blobs are named by it).
		if fi, serr := os.Stat(dst); serr == nil && fi.Size() == b.Size {
			return false, nil
		}
		return false, inbox.Storage(fmt.Errorf("%s exists with another size", dst), "store blob")
	}
	if err != nil {
		return false, inbox.Storage(err, "store blob %s", b.SHA256)
	}
	return true, nil
}

// blobMeta reads a blob artifact's metadata.
type blobMeta struct {
	Blob   string `json:"blob"`
	Field  string `json:"field"`
	SHA256 string `json:"sha256"`
	Bytes  int64  `json:"bytes"`
}

// blobRefs lists the blobs a message names.
func blobRefs(m *inbox.Message) []blobMeta {
	var out []blobMeta
	for _, a := range m.Artifacts {
		if a.Kind != "blob" {
			continue
		}
		var bm blobMeta
		if bm.decodeJSON(a.MetadataJSON) == nil && bm.Blob != "" {
			out = append(out, bm)
		}
	}
	return out
}

func (bm blobMeta) String() string {
	return bm.Blob + " (" + strconv.FormatInt(bm.Bytes, 10) + " bytes)"
}
