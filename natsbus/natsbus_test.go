package natsbus_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/inbox-dev/inbox"
	"github.com/inbox-dev/inbox/bustest"
	"github.com/inbox-dev/inbox/internal/natstest"
	"github.com/inbox-dev/inbox/natsbus"
)

func TestConformance(t *testing.T) {
	srv := natstest.Start(t)
	var n atomic.Int64
	bustest.Run(t, func(t *testing.T) inbox.Bus {
		return create(t, natstest.Store(srv, fmt.Sprint("conf", n.Add(1))))
	})
}

// create makes and opens the store at db, closed when t ends.
func create(t *testing.T, db string) *natsbus.Bus {
	t.Helper()
	b, err := natsbus.Open(t.Context(), db, natsbus.Options{Create: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	return b
}

// A body over the inline limit goes to the blob store and reads back
// whole through the artifact the message carries.
func TestLargeBodyIsABlob(t *testing.T) {
	srv := natstest.Start(t)
	b := create(t, natstest.Store(srv, "blobs"))
	body := strings.Repeat("0123456789abcdef", 200<<10) // 3.2 MB
	r, err := b.Send(t.Context(), inbox.SendInput{From: "a", To: "b", Subject: "big", Content: inbox.Content{Body: body}})
	if err != nil {
		t.Fatal(err)
	}
	m := r.Message
	if m.Body != "" || len(m.Artifacts) != 1 || m.Artifacts[0].Kind != "blob" {
		t.Fatalf("message: body %d bytes, artifacts %+v", len(m.Body), m.Artifacts)
	}
	var meta struct {
		Blob  string `json:"blob"`
		Bytes int64  `json:"bytes"`
	}
	if err := json.Unmarshal(m.Artifacts[0].MetadataJSON, &meta); err != nil || meta.Bytes != int64(len(body)) {
		t.Fatalf("artifact metadata %s: %v", m.Artifacts[0].MetadataJSON, err)
	}
	rc, err := b.OpenBlob(t.Context(), meta.Blob)
	if err != nil {
		t.Fatal(err)
	}
	got, err := io.ReadAll(rc)
	rc.Close()
	if err != nil || string(got) != body {
		t.Fatalf("blob read back: %d bytes, %v", len(got), err)
	}
	if _, err := b.OpenBlob(t.Context(), "blobs/"+strings.Repeat("0", 64)); !errors.Is(err, inbox.ErrNotFound) {
		t.Errorf("a blob that is not there: %v", err)
	}
}

// A store's password never shows in an error, whether it was right or
// wrong; it is taken from the URL, the environment or an owner-only file.
func TestCredentialsNeverShown(t *testing.T) {
	const user, password = "alice", "s3cretPW"
	srv := natstest.StartAuth(t, user, password)
	host := strings.TrimPrefix(srv.ClientURL(), "nats://")
	withUser := "nats://" + user + "@" + host + "/creds"
	notShown := func(err error, secrets ...string) {
		t.Helper()
		if err == nil {
			t.Fatal("no error")
		}
		for _, s := range secrets {
			if strings.Contains(err.Error(), s) {
				t.Errorf("the error shows the secret %q: %v", s, err)
			}
		}
	}

	// Wrong, in the URL and in the environment.
	_, err := natsbus.Open(t.Context(), "nats://"+user+":WRONGpw@"+host+"/creds", natsbus.Options{Create: true})
	notShown(err, "WRONGpw")
	t.Setenv(inbox.EnvNATSPassword, "WRONGenv")
	_, err = natsbus.Open(t.Context(), withUser, natsbus.Options{Create: true})
	notShown(err, "WRONGenv")

	// Right, but no store yet: the hint names the URL without the password.
	t.Setenv(inbox.EnvNATSPassword, "")
	_, err = natsbus.Open(t.Context(), "nats://"+user+":"+password+"@"+host+"/creds", natsbus.Options{})
	notShown(err, password)
	if !errors.Is(err, inbox.ErrNotInitialized) || !strings.Contains(err.Error(), "nats://alice:xxxxx@"+host+"/creds") {
		t.Errorf("the error for a store not made yet: %v", err)
	}

	// Right: in the URL, in the environment, in a file.
	b, err := natsbus.Open(t.Context(), "nats://"+user+":"+password+"@"+host+"/creds", natsbus.Options{Create: true})
	if err != nil {
		t.Fatal(err)
	}
	b.Close()
	t.Setenv(inbox.EnvNATSPassword, password)
	b, err = natsbus.Open(t.Context(), withUser, natsbus.Options{})
	if err != nil {
		t.Fatalf("password in %s: %v", inbox.EnvNATSPassword, err)
	}
	b.Close()
	t.Setenv(inbox.EnvNATSPassword, "")
	file := filepath.Join(t.TempDir(), "secret")
	if err := os.WriteFile(file, []byte(password+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv(inbox.EnvNATSPasswordFile, file)
	b, err = natsbus.Open(t.Context(), withUser, natsbus.Options{})
	if err != nil {
		t.Fatalf("password in %s: %v", inbox.EnvNATSPasswordFile, err)
	}
	b.Close()
}

// TestCancelRetry: a call retrying through an outage (the server stopped)
// returns context.Canceled as soon as its context is cancelled, instead
// of retrying for the whole fail-over window.
func TestCancelRetry(t *testing.T) {
	srv := natstest.Start(t)
	b := create(t, natstest.Store(srv, "cancel"))
	srv.Shutdown()
	srv.WaitForShutdown()
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() {
		_, err := b.Send(ctx, inbox.SendInput{From: "a", To: "b", Subject: "during the outage"})
		done <- err
	}()
	// Whether the cancel comes before the first attempt or between
	// retries, the call must end with it.
	time.AfterFunc(200*time.Millisecond, cancel)
	select {
	case err := <-done:
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("got %v, want context.Canceled", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("send still retrying 10 s after its context was cancelled (the retry window is 30 s)")
	}
}
