package spool

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/inbox-dev/inbox"
)

// Session marks (the agent hooks' per-session cursor): sessions/<sha256 of
// agent and session>, holding the mark. Written whole (temp file and
// rename) without a flush: a mark lost to a crash of the machine costs one
// more reminder, never a message.

const sessionsDir = "sessions"

func (s *Store) sessionPath(agent, session string) string {
	return filepath.Join(s.dir, sessionsDir, inbox.SessionKey(agent, session))
}

// SessionMark returns the mark last recorded for agent's session.
func (s *Store) SessionMark(ctx context.Context, agent, session string) (string, error) {
	if err := inbox.CheckSession(agent, session); err != nil {
		return "", err
	}
	data, err := readFile(s.sessionPath(agent, session))
	if errors.Is(err, fs.ErrNotExist) {
		return "", nil
	}
	if err != nil {
		return "", inbox.Storage(err, "read the session mark of %s", agent)
	}
	return string(data), nil
}

// SetSessionMark records mark for agent's session.
func (s *Store) SetSessionMark(ctx context.Context, agent, session, mark string) error {
	if err := inbox.CheckSessionMark(agent, session, mark); err != nil {
		return err
	}
	p := s.sessionPath(agent, session)
	if err := os.Mkdir(filepath.Dir(p), s.dirMode); err != nil && !errors.Is(err, fs.ErrExist) {
		return inbox.Storage(err, "create %s", sessionsDir)
	}
	st, err := s.stage(p, []byte(mark))
	if err != nil {
		return err
	}
	if err := os.Rename(st.tmp, p); err != nil {
		os.Remove(st.tmp)
		return inbox.Storage(err, "record the session mark of %s", agent)
	}
	return nil
}
