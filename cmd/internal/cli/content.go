package cli

import (
	"bytes"
	"errors"
	"io"
	"io/fs"
	"os"
	"strings"
	"unicode/utf8"

	"github.com/spf13/pflag"

	"github.com/inbox-dev/inbox"
)

// contentFlags are the flags of every command that writes a message.
type contentFlags struct {
	summary, body, bodyFile, payload, key  string
	asBlob                                 bool
	artifacts, artifactKinds, artifactMeta []string
}

func (f *contentFlags) register(fs *pflag.FlagSet, summaryHelp string, withBody bool) {
	fs.StringVar(&f.summary, "summary", "", summaryHelp)
	if withBody {
		fs.StringVar(&f.body, "body", "", "message body (free text)")
		fs.StringVar(&f.bodyFile, "body-file", "", "read the body from a file (- for stdin); over 64 MiB, or not text, it is stored as a blob")
		fs.BoolVar(&f.asBlob, "blob", false, "store --body-file as a blob file in the store (an artifact of kind blob), whatever its size")
		fs.StringVar(&f.payload, "payload-json", "", "structured payload: one JSON value")
	}
	f.registerArtifacts(fs)
	fs.StringVar(&f.key, "idempotency-key", "", "retry-safe key: repeating the call with it returns the first result and writes nothing")
}

func (f *contentFlags) registerArtifacts(fs *pflag.FlagSet) {
	fs.StringArrayVar(&f.artifacts, "artifact", nil, "attach a file reference (path stored, file not read); repeatable")
	fs.StringArrayVar(&f.artifactKinds, "artifact-kind", nil, "kind of the matching --artifact (default file); repeatable, paired in order")
	fs.StringArrayVar(&f.artifactMeta, "artifact-metadata-json", nil, "JSON metadata of the matching --artifact; repeatable, paired in order")
}

// content validates the pairing of artifact flags and reads --body-file
// (a body that cannot be stored inline becomes a blob staged in s).
func (f *contentFlags) content(c *call, s inbox.Bus) (inbox.Content, error) {
	if c.fs.Changed("payload-json") && strings.Trim(f.payload, " \t\r\n") == "" {
		return inbox.Content{}, usagef("payload-json", "--payload-json is empty: leave it out, or give a JSON value such as {}")
	}
	arts, err := f.artifactInputs()
	if err != nil {
		return inbox.Content{}, err
	}
	out := inbox.Content{Summary: f.summary, PayloadJSON: f.payload, Artifacts: arts, IdempotencyKey: f.key}
	if out.Body, out.Blobs, err = f.readBody(c, s); err != nil {
		return inbox.Content{}, err
	}
	return out, nil
}

// readBody returns --body, or the contents of --body-file ("-" is
// stdin). A file larger than spool.MaxInline, or one that is not text
// (not UTF-8, or holding NUL bytes), or any file with --blob, is not read
// into memory: it is staged as a blob of the store, which the message
// carries as an artifact.
func (f *contentFlags) readBody(c *call, s inbox.Bus) (string, []*inbox.Blob, error) {
	if f.bodyFile == "" {
		if f.asBlob {
			return "", nil, usagef("blob", "--blob stores --body-file as a blob: give --body-file")
		}
		return f.body, nil, nil
	}
	if f.body != "" {
		return "", nil, usagef("body-file", "give --body or --body-file, not both")
	}
	var r io.Reader = c.env.stdin
	if f.bodyFile != "-" {
		file, err := os.Open(f.bodyFile)
		if err != nil {
			return "", nil, usagef("body-file", "--body-file %s: %v", f.bodyFile, errText(err))
		}
		defer file.Close()
		if fi, err := file.Stat(); err == nil && !fi.Mode().IsRegular() && !fi.Mode().IsDir() {
			// A pipe or device: read it as a stream, like stdin.
		} else if err == nil && fi.IsDir() {
			return "", nil, usagef("body-file", "--body-file %s is a directory", f.bodyFile)
		}
		r = file
	}
	if f.asBlob {
		b, err := s.StageBlob("body", r)
		return "", blobs(b), err
	}
	// Read up to the inline limit; past it, the rest streams into a blob.
	data, err := io.ReadAll(io.LimitReader(r, inbox.MaxInline+1))
	if err != nil {
		return "", nil, usagef("body-file", "--body-file %s: %v", f.bodyFile, errText(err))
	}
	if len(data) <= inbox.MaxInline && utf8.Valid(data) && bytes.IndexByte(data, 0) < 0 {
		return string(data), nil, nil
	}
	b, err := s.StageBlob("body", io.MultiReader(bytes.NewReader(data), r))
	return "", blobs(b), err
}

func blobs(b *inbox.Blob) []*inbox.Blob {
	if b == nil {
		return nil
	}
	return []*inbox.Blob{b}
}

// errText is an OS error without the operation and path the caller
// already names ("no such file or directory").
func errText(err error) string {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return pe.Err.Error()
	}
	return err.Error()
}

func (f *contentFlags) artifactInputs() ([]inbox.ArtifactInput, error) {
	if len(f.artifactKinds) > len(f.artifacts) {
		return nil, usagef("artifact-kind", "--artifact-kind given %d times but --artifact only %d: they pair in order", len(f.artifactKinds), len(f.artifacts))
	}
	if len(f.artifactMeta) > len(f.artifacts) {
		return nil, usagef("artifact-metadata-json", "--artifact-metadata-json given %d times but --artifact only %d: they pair in order", len(f.artifactMeta), len(f.artifacts))
	}
	var out []inbox.ArtifactInput
	for i, p := range f.artifacts {
		a := inbox.ArtifactInput{Path: p}
		if i < len(f.artifactKinds) {
			a.Kind = f.artifactKinds[i]
		}
		if i < len(f.artifactMeta) {
			a.MetadataJSON = f.artifactMeta[i]
		}
		out = append(out, a)
	}
	return out, nil
}

// typedFlags are seed 002's protocol flags of send and reply (SPEC §10).
type typedFlags struct {
	typ, contentJSON, requestID string
	request, ackRequired        bool
}

func (f *typedFlags) register(fs *pflag.FlagSet, send bool) {
	fs.StringVar(&f.typ, "type", "", "seed 002 message type: "+strings.Join(inbox.MessageTypes, "|")+", or any [a-z_]+")
	fs.StringVar(&f.contentJSON, "content-json", "", "seed 002's content: a JSON object, stored as the message's payload (instead of --payload-json)")
	if send {
		fs.StringVar(&f.requestID, "request-id", "", "make the message a request with this id; wait for its response with wait-reply --request-id")
		fs.BoolVar(&f.request, "request", false, "make the message a request with a generated id (printed as request_id)")
	} else {
		fs.StringVar(&f.requestID, "request-id", "", "answer the request that carries this id (its sender waits with wait-reply --request-id)")
	}
	fs.BoolVar(&f.ackRequired, "ack-required", false, "ask each recipient to acknowledge the message (inbox ack)")
}

// apply sets the typed fields of out.
func (f *typedFlags) apply(c *call, out *inbox.Content) error {
	if c.fs.Changed("content-json") {
		if c.fs.Changed("payload-json") {
			return usagef("content-json", "give --content-json or --payload-json, not both: both are the message's payload")
		}
		if v := strings.TrimSpace(f.contentJSON); !strings.HasPrefix(v, "{") {
			return usagef("content-json", `--content-json must be a JSON object (seed 002's content), e.g. '{"text":"Hello"}'`)
		}
		out.PayloadJSON = f.contentJSON
	}
	if c.fs.Changed("type") && f.typ == "" {
		return usagef("type", "--type is empty: leave it out, or give a type such as task_assignment")
	}
	out.Type, out.RequestID, out.Request, out.AckRequired = f.typ, f.requestID, f.request, f.ackRequired
	return nil
}

// any reports whether a typed flag was given.
func (f *typedFlags) any(c *call) bool {
	for _, n := range []string{"type", "content-json", "request-id", "request", "ack-required"} {
		if c.fs.Lookup(n) != nil && c.fs.Changed(n) {
			return true
		}
	}
	return false
}

func seed002Flag(fs *pflag.FlagSet, v *bool) {
	fs.BoolVar(v, "seed002", false, `print each message as a seed-002 JSON line ({"type","from","to","timestamp","content",...})`)
}

// asSeed002 makes res print its messages ("messages", or "message") as
// seed-002 lines, one per line.
func asSeed002(c *call, res *result) (*result, error) {
	if c.g.json {
		return nil, usagef("seed002", "give --seed002 or --json, not both")
	}
	var msgs []*inbox.Message
	if v, ok := res.get("messages").([]*inbox.Message); ok {
		msgs = v
	} else if m, ok := res.get("message").(*inbox.Message); ok && m != nil {
		msgs = []*inbox.Message{m}
	}
	res.human = func(w io.Writer) {
		for _, m := range msgs {
			w.Write(append(inbox.Seed002Of(m).Line(), '\n'))
		}
	}
	return res, nil
}
