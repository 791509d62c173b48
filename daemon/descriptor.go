package daemon

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/inbox-dev/inbox"
	"github.com/inbox-dev/inbox/intake"
	"github.com/inbox-dev/inbox/internal/safefile"
)

// youngAge is how long a descriptor that does not parse is given to finish
// being written before it is refused.
const youngAge = 2 * time.Second

// prepare reads and validates one descriptor. It refuses bad ones on the
// spot and returns nil for them, for ones gone meanwhile and for ones that
// may still be being written.
func (d *daemon) prepare(name string) *job {
	p := filepath.Join(d.cfg.Intake, name)
	fi, err := os.Lstat(p)
	if err != nil {
		return nil // gone meanwhile
	}
	switch {
	case fi.Mode()&fs.ModeSymlink != 0:
		d.refuse(name, "symlinks are refused: drop the descriptor itself, not a link to it")
		return nil
	case !fi.Mode().IsRegular():
		d.refuse(name, fmt.Sprintf("not a regular file (%s)", fi.Mode().Type()))
		return nil
	case fi.Size() > intake.MaxSize:
		d.refuse(name, fmt.Sprintf("descriptor is %d bytes; the limit is %d", fi.Size(), intake.MaxSize))
		return nil
	}
	data, ident, err := readDescriptor(p)
	if errors.Is(err, fs.ErrNotExist) {
		return nil // gone meanwhile, or the intake directory swapped
	}
	if err != nil {
		d.log.Error("cannot read descriptor", "file", name, "error", err)
		return nil
	}
	desc, err := intake.Parse(data)
	if errors.Is(err, intake.ErrSyntax) && time.Since(fi.ModTime()) < youngAge {
		// Possibly still being written: give it a moment.
		d.resweepAt(fi.ModTime().Add(youngAge))
		return nil
	}
	if err != nil {
		d.refuse(name, err.Error())
		return nil
	}
	if desc.Kind == intake.KindSpawnWorker && !d.cfg.TrustAll {
		d.refuse(name, "spawn_worker descriptors are refused unless the daemon runs with --trust-all (or INBOX_TRUST_ALL=1)")
		return nil
	}
	sum := sha256.Sum256(data)
	hash := hex.EncodeToString(sum[:])
	in, err := d.toSend(desc)
	if err != nil {
		d.refuse(name, err.Error())
		return nil
	}
	// The key of this drop: its name, content and file identity. A retry
	// after a crash sees the same key; a new drop under the name does not.
	in.IdempotencyKey = dropKey(name, hash, ident)
	if in.ThreadID == "" {
		in.Origin = &inbox.Origin{Descriptor: displayName(name), SHA256: hash}
	}
	// A new drop under an old name must not be taken for finished.
	os.Remove(filepath.Join(d.cfg.Intake, FileBase(name)+SuffixOutcome))
	return &job{name: name, desc: desc, hash: hash, in: in}
}

// readDescriptor reads a descriptor, up to one byte past the limit,
// without following a symlink or blocking on a FIFO (safefile), and
// returns its bytes and the identity of this very file.
func readDescriptor(p string) ([]byte, string, error) {
	f, err := safefile.OpenFile(p, os.O_RDONLY, 0)
	if err != nil {
		return nil, "", err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, "", err
	}
	data, err := io.ReadAll(io.LimitReader(f, intake.MaxSize+1))
	if err != nil {
		return nil, "", err
	}
	return data, identity(fi), nil
}

// dropKey is the idempotency key of one drop: the descriptor's name, its
// content's SHA-256 and the file's identity. A name that would make the
// key too long, or is not UTF-8, is replaced by its SHA-256.
func dropKey(name, hash, ident string) string {
	key := "intake:" + name + ":" + hash + ":" + ident
	if len(key) <= inbox.MaxIdemKeyLen && utf8.ValidString(name) {
		return key
	}
	sum := sha256.Sum256([]byte(name))
	return "intake:sha256-" + hex.EncodeToString(sum[:]) + ":" + hash + ":" + ident
}

// displayName is a descriptor's name as JSON can carry it: bytes that are
// not UTF-8 become U+FFFD.
func displayName(name string) string { return strings.ToValidUTF8(name, "\uFFFD") }

// descriptorField maps the store's field names to descriptor fields,
// where they differ.
var descriptorField = map[string]string{"kind": "message_kind", "payload_json": "payload", "run": "run_id",
	"task": "task_id", "artifact": "artifacts", "artifact_kind": "artifacts", "artifact_metadata_json": "artifacts"}

// descriptorName names a store field as the writer of a descriptor knows it.
func descriptorName(field string) string {
	if f, ok := descriptorField[field]; ok {
		return f
	}
	return field
}

// fieldError phrases a store refusal in the descriptor's terms: the field
// as the writer of the descriptor knows it, not a CLI flag.
func fieldError(err error) string {
	var se *inbox.Error
	if !errors.As(err, &se) {
		return err.Error()
	}
	if se.Field == "" {
		return se.Render(descriptorName)
	}
	rule := &inbox.Error{Rule: se.Rule}
	return fmt.Sprintf("field %q: %s", descriptorName(se.Field), rule.Render(descriptorName))
}

// toSend turns a descriptor into a send.
func (d *daemon) toSend(desc *intake.Descriptor) (inbox.SendInput, error) {
	from := desc.From
	if from == "" {
		from = "intake"
	}
	switch desc.Kind {
	case intake.KindPrompt:
		to := desc.To
		if to == "" {
			to = d.cfg.IntakeTo
		}
		subject := desc.Subject
		if subject == "" {
			subject = inbox.Shorten(inbox.FirstLine(desc.Prompt), 80)
			if subject == "" {
				subject = "prompt"
			}
		}
		return inbox.SendInput{From: from, To: to, Subject: subject, Kind: inbox.KindTask, Priority: desc.Priority,
			TaskID: desc.TaskID, Content: inbox.Content{Body: desc.Prompt}}, nil
	case intake.KindSend:
		in := inbox.SendInput{From: from, To: desc.To, Subject: desc.Subject, ThreadID: desc.Thread, RunID: desc.RunID,
			TaskID: desc.TaskID, Kind: desc.MessageKind, Priority: desc.Priority,
			Content: inbox.Content{Summary: desc.Summary, Body: desc.Body, PayloadJSON: string(desc.Payload)}}
		for _, a := range desc.Artifacts {
			in.Artifacts = append(in.Artifacts, inbox.ArtifactInput{Path: a.Path, Kind: a.Kind, MetadataJSON: string(a.Metadata)})
		}
		return in, nil
	case intake.KindSpawnWorker:
		payload, err := json.Marshal(map[string]any{"spawn_worker": map[string]any{
			"agent_type": desc.AgentType, "name": desc.Name, "prompt": desc.Prompt, "task_id": desc.TaskID,
			"skill": desc.Skill, "role": desc.Role, "skills": desc.Skills, "model": desc.Model, "cwd": desc.Cwd}})
		if err != nil {
			return inbox.SendInput{}, err
		}
		return inbox.SendInput{From: from, To: d.cfg.IntakeTo, Subject: "spawn_worker " + desc.AgentType + ": " + desc.Name,
			Kind: inbox.KindTask, TaskID: desc.TaskID,
			Content: inbox.Content{Summary: "spawn " + desc.AgentType + " worker " + desc.Name, Body: desc.Prompt,
				PayloadJSON: string(payload)}}, nil
	}
	return inbox.SendInput{}, fmt.Errorf("unknown descriptor kind %q", desc.Kind)
}
