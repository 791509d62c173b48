package daemon

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/google/renameio/v2"

	"github.com/inbox-dev/inbox"
	"github.com/inbox-dev/inbox/intake"
	"github.com/inbox-dev/inbox/internal/durable"
)

// Lifecycle file suffixes, appended to NAME.task.json.
const (
	SuffixProcessed = ".processed"
	SuffixFailed    = ".failed"
	SuffixResult    = ".result"
	SuffixOutcome   = ".outcome"
)

// maxKeptName is the longest descriptor name the daemon's files can be
// named after: the longest of them is NAME + ".processed", within the 255
// bytes a file name may have. The daemon's temp files have short names of
// their own (tempPrefix), whatever NAME is.
const maxKeptName = 255 - len(SuffixProcessed)

// tempPrefix starts the name of every temp file the daemon writes in the
// intake directory (the .result and .outcome files before they are
// renamed into place): tempPrefix and random digits, so that the temp
// file's name never limits the descriptor's.
const tempPrefix = ".inbox-daemon.tmp"

// FileBase returns the name under which the daemon writes a descriptor's
// .result and .outcome and renames the descriptor when it is done: name
// itself when NAME.processed is a legal file name (at most 255 bytes), or,
// for a longer name, the SHA-256 of the name in hex followed by
// ".task.json" (docs/FORMAT.md).
func FileBase(name string) string {
	if len(name) <= maxKeptName {
		return name
	}
	sum := sha256.Sum256([]byte(name))
	return hex.EncodeToString(sum[:]) + intake.Suffix
}

// Result is the content of NAME.task.json.result.
type Result struct {
	OK           bool            `json:"ok"`
	DispatchedAt string          `json:"dispatchedAt,omitempty"`
	Descriptor   *DescriptorInfo `json:"descriptor,omitempty"`
	ThreadID     string          `json:"thread_id,omitempty"`
	MessageID    string          `json:"message_id,omitempty"`
	Error        string          `json:"error,omitempty"`
	FailedAt     string          `json:"failedAt,omitempty"`
}

// DescriptorInfo says which descriptor a result is about.
type DescriptorInfo struct {
	Kind   string `json:"kind"`
	Name   string `json:"name"`
	SHA256 string `json:"sha256"`
}

// Outcome is the content of NAME.task.json.outcome: the thread's final
// status and its last message.
type Outcome struct {
	OK         bool           `json:"ok"`
	Status     string         `json:"status"`
	ThreadID   string         `json:"thread_id"`
	Summary    string         `json:"summary"`
	Result     *inbox.Message `json:"result"`
	FinishedAt string         `json:"finishedAt"`
}

// cleanTemps removes the temp files of .result and .outcome writes that a
// killed daemon left in the intake directory. Only one daemon runs, so at
// start every such file is stale. Droppers' own temp files are left alone.
func (d *daemon) cleanTemps() {
	entries, err := os.ReadDir(d.cfg.Intake)
	if err != nil {
		return
	}
	for _, e := range entries {
		n := e.Name()
		if !strings.HasPrefix(n, ".") {
			continue
		}
		if rest, ok := strings.CutPrefix(n, tempPrefix); ok && rest != "" && strings.Trim(rest, "0123456789") == "" {
			os.Remove(filepath.Join(d.cfg.Intake, n))
			continue
		}
		// The names earlier versions gave their temp files:
		// "." + NAME + ".result" or ".outcome" + random digits.
		for _, suf := range []string{intake.Suffix + SuffixResult, intake.Suffix + SuffixOutcome} {
			i := strings.LastIndex(n, suf)
			if i > 0 && i+len(suf) < len(n) && strings.Trim(n[i+len(suf):], "0123456789") == "" {
				os.Remove(filepath.Join(d.cfg.Intake, n))
			}
		}
	}
}

// refuse finishes a descriptor as failed.
func (d *daemon) refuse(name, reason string) {
	result := &Result{OK: false, Error: reason, FailedAt: inbox.FormatTime(time.Now())}
	if err := d.finish(name, SuffixFailed, result); err != nil {
		d.log.Error("cannot finish descriptor; will retry", "file", name, "error", err)
		d.failed(name)
		return
	}
	delete(d.retry, name)
	d.log.Warn("descriptor refused", "file", name, "error", reason)
}

// finish writes NAME.result and renames the descriptor to NAME+suffix.
func (d *daemon) finish(name, suffix string, result *Result) error {
	return d.finishAll([]string{name}, suffix, []*Result{result})
}

// finishAll writes each NAME.result (fsynced, renamed into place) and only
// then renames each descriptor to NAME+suffix; one fsync of the intake
// directory makes all the renames durable. A crash between the two leaves
// a descriptor pending: the retry writes the same result again.
func (d *daemon) finishAll(names []string, suffix string, results []*Result) error {
	dir, err := os.OpenRoot(d.cfg.Intake)
	if err != nil {
		return err
	}
	defer dir.Close()
	files := make([]string, len(names))
	for i, name := range names {
		files[i] = FileBase(name) + SuffixResult
	}
	if err := publish(dir, files, results); err != nil {
		return err
	}
	other := SuffixFailed
	if suffix == SuffixFailed {
		other = SuffixProcessed
	}
	for _, name := range names {
		done := FileBase(name)
		dir.Remove(done + other) // from an earlier drop under the same name
		if err := dir.Rename(name, done+suffix); err != nil {
			return err
		}
	}
	at(hookFinish)
	return syncDir(dir) // makes every rename durable
}

// writeOutcomes writes each NAME.outcome (fsynced, renamed into place,
// the directory fsynced) for the descriptor names of one thread.
func (d *daemon) writeOutcomes(names []string, out *Outcome) error {
	dir, err := os.OpenRoot(d.cfg.Intake)
	if err != nil {
		return err
	}
	defer dir.Close()
	files, outs := make([]string, len(names)), make([]*Outcome, len(names))
	for i, name := range names {
		files[i], outs[i] = name+SuffixOutcome, out
	}
	if err := publish(dir, files, outs); err != nil {
		return err
	}
	return syncDir(dir)
}

// publish writes each values[i] as indented JSON (0600) to files[i] in
// dir: to temp files first, whose fsyncs overlap, then renamed into
// place; the caller fsyncs the directory. Every rename is made in dir, the
// intake directory as it was when the caller opened it: if another
// directory has been put in its place since (moved away and replaced), a
// temp file made at the intake's path is not found there and publish
// fails, to be retried, instead of answering in one directory and making
// the other durable.
func publish[T any](dir *os.Root, files []string, values []T) error {
	var pending []*renameio.PendingFile
	defer func() {
		for _, pf := range pending {
			pf.Cleanup()
		}
	}()
	for _, v := range values {
		data, err := json.MarshalIndent(v, "", "  ")
		if err != nil {
			return err
		}
		pf, err := tempFile(dir.Name())
		if err != nil {
			return err
		}
		pending = append(pending, pf)
		if _, err := pf.Write(append(data, '\n')); err != nil {
			return err
		}
	}
	if err := durable.SyncFiles(pending); err != nil {
		return err
	}
	for i, pf := range pending {
		if err := pf.Close(); err != nil {
			return err
		}
		if err := dir.Rename(filepath.Base(pf.Name()), files[i]); err != nil {
			return err
		}
	}
	return nil
}

// syncDir fsyncs the directory dir so that the renames made in it survive
// a power cut.
func syncDir(dir *os.Root) error {
	f, err := dir.Open(".")
	if err != nil {
		return err
	}
	return errors.Join(f.Sync(), f.Close())
}

// tempFile opens a new temp file (0600) in dir, named tempPrefix and
// random digits whatever file it will become: the caller writes, fsyncs
// and closes it, then renames it into place.
func tempFile(dir string) (*renameio.PendingFile, error) {
	return renameio.NewPendingFile(filepath.Join(dir, tempPrefix[1:]), renameio.WithTempDir(dir), renameio.WithStaticPermissions(0o600))
}
