package teamfiles

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"time"

	"github.com/google/renameio/v2"

	"github.com/inbox-dev/inbox"
)

// Claude Code's team files (SPEC §11 --claude-teams):
//
//	DIR/{team}/config.json             {"name", "members":[{"name", "agentId", …}], …}
//	DIR/{team}/inboxes/{agent}.json    [{"from","text","summary","timestamp","read","color"}, …]
//	DIR/{team}/inboxes/{agent}.json.lock   the mkdir lock around every change (stale after 10 s)
//	DIR/.inbox-bridge/claude.json      the bridge's state
//	DIR/.inbox-bridge/errors.log       entries that could not be taken in
//
// This file holds the format and its lock, as Claude Code reads and
// writes them; claude_bridge.go keeps the files in step with the bus.

// claudeEntry is one message of a Claude Code inbox file. Fields the
// bridge does not know are kept as they are.
type claudeEntry struct {
	From      string `json:"from"`
	Text      string `json:"text"`
	Summary   string `json:"summary,omitempty"`
	Timestamp string `json:"timestamp"`
	Read      bool   `json:"read"`
	Color     string `json:"color,omitempty"`
	rest      map[string]json.RawMessage
}

func (e *claudeEntry) UnmarshalJSON(b []byte) error {
	type plain claudeEntry
	if err := json.Unmarshal(b, (*plain)(e)); err != nil {
		return err
	}
	var all map[string]json.RawMessage
	if err := json.Unmarshal(b, &all); err != nil {
		return err
	}
	for _, k := range []string{"from", "text", "summary", "timestamp", "read", "color"} {
		delete(all, k)
	}
	if len(all) > 0 {
		e.rest = all
	}
	return nil
}

func (e claudeEntry) MarshalJSON() ([]byte, error) {
	type plain claudeEntry
	b, err := json.Marshal(plain(e))
	if err != nil || len(e.rest) == 0 {
		return b, err
	}
	extra, err := json.Marshal(e.rest)
	if err != nil {
		return nil, err
	}
	return append(append(b[:len(b)-1], ','), extra[1:]...), nil
}

// same reports whether e and o are the same message: Claude Code's
// entries have no ids, so sender, timestamp and text stand for one.
func (e *claudeEntry) same(o *claudeEntry) bool {
	return e.From == o.From && e.Timestamp == o.Timestamp && e.Text == o.Text
}

// entryOf is m as an entry of a Claude Code inbox: a typed message (other
// than seed 002's plain "message") as protocol JSON in the text.
func entryOf(m *inbox.Message) *claudeEntry {
	e := &claudeEntry{From: m.FromAgent, Summary: m.Summary, Timestamp: m.Timestamp}
	if e.Timestamp == "" {
		e.Timestamp = m.CreatedAt
	}
	switch {
	case m.Type != "" && m.Type != inbox.TypeMessage:
		obj := map[string]any{}
		json.Unmarshal(m.PayloadJSON, &obj)
		if obj == nil {
			obj = map[string]any{}
		}
		obj["type"] = m.Type
		if _, ok := obj["requestId"]; !ok && m.RequestID != "" {
			obj["requestId"] = m.RequestID
		}
		if _, ok := obj["ackId"]; !ok && m.AckID != "" {
			obj["ackId"] = m.AckID // what the teammate's acknowledgment names
		}
		data, _ := json.Marshal(obj)
		e.Text = string(data)
	case m.Body != "":
		e.Text = m.Body
	default:
		var c struct {
			Text string `json:"text"`
		}
		json.Unmarshal(m.PayloadJSON, &c)
		e.Text = c.Text
		if e.Text == "" {
			e.Text = m.Summary
		}
	}
	return e
}

// Claude Code's lock: a directory made beside the file, retried with
// back-off (5 ms doubling to 100 ms, about a second in all), taken over
// when older than 10 s.
const (
	lockStale   = 10 * time.Second
	lockRetries = 14
)

// errLocked is returned by lockFile when another writer held the lock
// through every retry.
var errLocked = errors.New("locked by another writer")

// lockFile takes Claude Code's lock on file p; unlock removes it.
func lockFile(p string) (unlock func(), err error) {
	lk := p + ".lock"
	wait := 5 * time.Millisecond
	for try := 0; ; try++ {
		err := os.Mkdir(lk, 0o700)
		if err == nil {
			return func() { os.Remove(lk) }, nil
		}
		if !errors.Is(err, fs.ErrExist) {
			return nil, err
		}
		if fi, serr := os.Lstat(lk); serr == nil && time.Since(fi.ModTime()) > lockStale {
			// Stale: its holder died. Take it over (as proper-lockfile does).
			os.Remove(lk)
			continue
		}
		if try == lockRetries {
			return nil, fmt.Errorf("%s: %w", lk, errLocked)
		}
		time.Sleep(wait)
		wait = min(2*wait, 100*time.Millisecond)
	}
}

// ensureInbox creates an inbox file as Claude Code does: [] exclusively,
// in its directory, which must exist. Anything but a regular file already
// at p is refused.
func ensureInbox(p string) error {
	f, err := openFile(p, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o600)
	if errors.Is(err, fs.ErrExist) {
		return regularOrMissing(p)
	}
	if err != nil {
		return err
	}
	_, err = f.WriteString("[]")
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

// readEntries reads an inbox file; a missing one has no entries, and
// anything but a regular file is refused.
func readEntries(p string) ([]*claudeEntry, error) {
	data, err := readFile(p)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	if len(bytes.TrimSpace(data)) == 0 {
		return nil, nil
	}
	var es []*claudeEntry
	if err := json.Unmarshal(data, &es); err != nil {
		return nil, fmt.Errorf("%s: %w", p, err)
	}
	return es, nil
}

// writeEntries replaces an inbox file whole (temp file and rename);
// anything but a regular file at p is refused, not replaced.
func writeEntries(p string, es []*claudeEntry) error {
	if es == nil {
		es = []*claudeEntry{}
	}
	data, err := json.MarshalIndent(es, "", "  ")
	if err != nil {
		return err
	}
	if err := regularOrMissing(p); err != nil {
		return err
	}
	return renameio.WriteFile(p, data, 0o600)
}

// beforeReplace, when set (tests), runs in updateEntries between its read
// and its rename.
var beforeReplace func(p string)

// updateEntries runs change on the entries of inbox file p under Claude
// Code's lock and writes them back when change reports that it changed
// them. A file replaced or changed without the lock (a person's recipe)
// between the read and the rename is read again, a few times, so that
// what the recipe removed is not written back.
func updateEntries(p string, change func(es []*claudeEntry) ([]*claudeEntry, bool)) error {
	unlock, err := lockFile(p)
	if err != nil {
		return err
	}
	defer unlock()
	for try := 0; ; try++ {
		before, _ := os.Lstat(p)
		es, err := readEntries(p)
		if err != nil {
			return err
		}
		es, changed := change(es)
		if !changed {
			return nil
		}
		if beforeReplace != nil {
			beforeReplace(p)
		}
		if after, _ := os.Lstat(p); try < 3 && !sameVersion(before, after) {
			continue
		}
		return writeEntries(p, es)
	}
}

// sameVersion reports whether two looks at a file saw the same version
// of it: the same file, size and modification time (both missing counts).
func sameVersion(a, b fs.FileInfo) bool {
	if a == nil || b == nil {
		return a == nil && b == nil
	}
	return os.SameFile(a, b) && a.Size() == b.Size() && a.ModTime().Equal(b.ModTime())
}
