//go:build unix

package natsserve

import (
	"errors"
	"io/fs"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"
)

// statInfo is a FileInfo with a chosen owner.
type statInfo struct {
	mode fs.FileMode
	uid  uint32
}

func (f statInfo) Name() string       { return SecretFile }
func (f statInfo) Size() int64        { return 44 }
func (f statInfo) Mode() fs.FileMode  { return f.mode }
func (f statInfo) ModTime() time.Time { return time.Time{} }
func (f statInfo) IsDir() bool        { return f.mode.IsDir() }
func (f statInfo) Sys() any           { return &syscall.Stat_t{Uid: f.uid} }

// TestCheckSecretFileOwner checks that a 0600 secret's file another user
// owns (planted by whoever can write the store directory, with a secret
// they know) is refused, and this user's is taken. A unit test, since
// only root can give a file away.
func TestCheckSecretFileOwner(t *testing.T) {
	self := uint32(os.Geteuid())
	if err := checkSecretFile("/d/"+SecretFile, statInfo{mode: 0o600, uid: self}); err != nil {
		t.Errorf("this user's 0600 file: %v, want taken", err)
	}
	err := checkSecretFile("/d/"+SecretFile, statInfo{mode: 0o600, uid: self + 1})
	if !errors.Is(err, ErrSecretFile) || !strings.Contains(err.Error(), "is owned by uid") {
		t.Errorf("another user's 0600 file: %v, want ErrSecretFile saying whose it is", err)
	}
}
