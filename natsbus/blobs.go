package natsbus

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"io"
	"os"
	"strings"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/inbox-dev/inbox"
)

// Blobs. A body or payload over inlineMax (its share of the server's 1 MB
// message) or that is not text lives in the object store INBOX_NAME_BLOBS
// under its SHA-256; the message carries an artifact of kind blob naming
// it ("blobs/<sha256>"), as on a directory. A blob is stored before the
// message that names it commits; one whose message never committed is
// left behind, harmless (content-addressed, never named).

const inlineMax = 512 << 10

// staged is a blob waiting in a temp file on this machine.
type staged struct{ path string }

func stagedOf(b *inbox.Blob) *staged {
	s, _ := b.Staged.(*staged)
	return s
}

func (b *Bus) objects(ctx context.Context) (jetstream.ObjectStore, error) {
	var os jetstream.ObjectStore
	err := b.retry(ctx, func(ctx context.Context) (err error) {
		os, err = b.js.ObjectStore(ctx, b.streamName()+"_BLOBS")
		if errors.Is(err, jetstream.ErrBucketNotFound) {
			os, err = b.js.CreateObjectStore(ctx, jetstream.ObjectStoreConfig{Bucket: b.streamName() + "_BLOBS",
				Description: "inbox store " + b.name + ": blobs by SHA-256", Storage: jetstream.FileStorage, Replicas: b.replicas})
		}
		return err
	})
	return os, inbox.Storage(err, "open the blob store")
}

// StageBlob stages content too large or not text for a message.
func (b *Bus) StageBlob(ctx context.Context, field string, r io.Reader) (*inbox.Blob, error) {
	f, err := os.CreateTemp("", "inbox-blob-*")
	if err != nil {
		return nil, inbox.Storage(err, "stage blob")
	}
	d := sha256.New()
	n, err := io.Copy(io.MultiWriter(f, d), r)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		os.Remove(f.Name())
		return nil, inbox.Storage(err, "stage blob")
	}
	return &inbox.Blob{Field: field, SHA256: hex.EncodeToString(d.Sum(nil)), Size: n, Staged: &staged{path: f.Name()}}, nil
}

// AdoptBlob stages the file at path (a task's captured output).
func (b *Bus) AdoptBlob(ctx context.Context, field, path string) (*inbox.Blob, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, inbox.Storage(err, "read %s", path)
	}
	defer f.Close()
	return b.StageBlob(ctx, field, f)
}

// OpenBlob opens a blob a message names (blobs/<sha256>).
func (b *Bus) OpenBlob(ctx context.Context, ref string) (io.ReadCloser, error) {
	sum, ok := strings.CutPrefix(ref, "blobs/")
	if !ok || len(sum) != 64 || strings.Trim(sum, "0123456789abcdef") != "" {
		return nil, inbox.Invalid("blob", "%q is not a blob reference (blobs/<sha256>)", ref)
	}
	store, err := b.objects(ctx)
	if err != nil {
		return nil, err
	}
	var res jetstream.ObjectResult
	// The call's context, not the attempt's: the object streams after
	// the attempt's timeout is cancelled.
	err = b.retry(ctx, func(context.Context) (err error) {
		res, err = store.Get(ctx, sum)
		return err
	})
	if errors.Is(err, jetstream.ErrObjectNotFound) {
		return nil, inbox.NotFound("blob %s not found", ref)
	}
	return res, inbox.Storage(err, "read blob %s", ref)
}

// store puts a staged blob in the object store (once: its name is its
// content) and drops the temp file.
func (b *Bus) store(ctx context.Context, bl *inbox.Blob) error {
	st := stagedOf(bl)
	if st == nil {
		return inbox.Invalid("blob", "was not staged by this store")
	}
	defer os.Remove(st.path)
	objs, err := b.objects(ctx)
	if err != nil {
		return err
	}
	err = b.retry(ctx, func(actx context.Context) error {
		if _, err := objs.GetInfo(actx, bl.SHA256); err == nil {
			return nil
		}
		f, err := os.Open(st.path)
		if err != nil {
			return err
		}
		defer f.Close()
		// The call's context, not the attempt's: a large blob takes
		// longer than one request's timeout to upload.
		_, err = objs.Put(ctx, jetstream.ObjectMeta{Name: bl.SHA256}, f)
		return err
	})
	return inbox.Storage(err, "store blob %s", bl.SHA256)
}

// blobStager is the store as inbox.NewMessage stages blobs in it.
type blobStager struct{ b *Bus }

func (s blobStager) StageBlob(ctx context.Context, field string, r io.Reader) (*inbox.Blob, error) {
	return s.b.StageBlob(ctx, field, r)
}
func (s blobStager) BlobArtifact(bl *inbox.Blob) inbox.ArtifactInput {
	meta, _ := json.Marshal(map[string]any{"blob": bl.Ref(), "field": bl.Field, "sha256": bl.SHA256, "bytes": bl.Size})
	return inbox.ArtifactInput{Path: bl.Ref(), Kind: "blob", MetadataJSON: string(meta)}
}
func (s blobStager) DiscardBlob(bl *inbox.Blob) {
	if st := stagedOf(bl); st != nil {
		os.Remove(st.path)
	}
}
