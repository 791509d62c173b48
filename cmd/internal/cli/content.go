package cli

import (
	"bytes"
	"errors"
	"io"
	"io/fs"
	"os"
	"runtime/debug"
	"slices"
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

// openContent opens the store and reads the message's content from f:
// the order every command that writes a message follows.
func (c *call) openContent(f *contentFlags) (inbox.Bus, inbox.Content, error) {
	s, err := c.open()
	if err != nil {
		return nil, inbox.Content{}, err
	}
	content, err := f.content(c, s)
	if err != nil {
		return nil, inbox.Content{}, err
	}
	return s, content, nil
}

// readBody returns --body, or the contents of --body-file ("-" is
// stdin). A file larger than spool.MaxInline, or one that is not text
// (not UTF-8, or holding NUL bytes), or any file with --blob, is not read
// into memory: it is staged as a blob of the store, which the message
// carries as an artifact.
//
// Input is bounded (SPEC §8): a file larger than the store's maximum
// (inbox init --max-blob) is refused before a byte is read, and a stream
// (stdin, a pipe, a FIFO, a device) is read no further than one byte
// past it, then refused; either way with too_large (exit 30) naming
// --body-file, and nothing left in the store.
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
	file, _ := r.(*os.File) // stdin redirected from a file has a size too
	if f.bodyFile != "-" {
		var err error
		if file, err = os.Open(f.bodyFile); err != nil {
			return "", nil, usagef("body-file", "--body-file %s: %v", f.bodyFile, errText(err))
		}
		defer file.Close()
		if fi, err := file.Stat(); err == nil && fi.IsDir() {
			return "", nil, usagef("body-file", "--body-file %s is a directory", f.bodyFile)
		}
		// A pipe or device is read as a stream, like stdin.
		r = file
	}
	limit := maxBlob(s)
	size := int64(-1) // unknown: a stream
	if file != nil {
		if fi, err := file.Stat(); err == nil && fi.Mode().IsRegular() {
			size = fi.Size()
		}
	}
	if size > limit {
		return "", nil, inbox.TooLarge("body_file", size, limit, "this store's maximum (max_blob)", "raise the maximum (inbox init --max-blob SIZE)")
	}
	if f.asBlob {
		b, err := s.StageBlob(c.ctx, "body", r)
		return "", blobs(b), asBodyFile(err)
	}
	// Text up to the inline limit is read into memory; past it, or at the
	// first NUL byte, the rest streams into a blob.
	body, text, head, n, err := readInline(r, min(inbox.MaxInline, limit), size)
	if err != nil {
		return "", nil, usagef("body-file", "--body-file %s: %v", f.bodyFile, errText(err))
	}
	if text {
		return body, nil, nil
	}
	if n > limit {
		return "", nil, inbox.TooLarge("body_file", -1, limit, "this store's maximum (max_blob)", "raise the maximum (inbox init --max-blob SIZE)")
	}
	b, err := s.StageBlob(c.ctx, "body", io.MultiReader(head, r))
	return "", blobs(b), asBodyFile(err)
}

// maxBlob is the largest body the store takes (spool's MaxBlob, which
// inbox init --max-blob sets); inbox.DefaultMaxBlob for a bus that does
// not say.
func maxBlob(s inbox.Bus) int64 {
	if m, ok := s.(interface{ MaxBlob() int64 }); ok {
		return m.MaxBlob()
	}
	return inbox.DefaultMaxBlob
}

// asBodyFile makes a refusal of the body, read from --body-file, name
// that flag.
func asBodyFile(err error) error {
	var se *inbox.Error
	if errors.As(err, &se) && se.Code == "too_large" && se.Field == "body" {
		c := *se
		c.Field = "body_file"
		return &c
	}
	return err
}

// readInline reads r into a string when it is text (UTF-8 without NUL
// bytes) of at most max bytes: text is true. Otherwise it stops, at the
// first NUL byte or past max bytes, without reading further than max+1,
// and head reads again the n bytes it took, to go before the rest of r.
// size, when not negative, is how many bytes r holds (a regular file):
// the string is then made to that size at once, and a file over max is
// not read at all.
func readInline(r io.Reader, max, size int64) (body string, text bool, head io.Reader, n int64, err error) {
	if size > max {
		return "", false, strings.NewReader(""), 0, nil
	}
	if size >= 0 {
		var sb strings.Builder
		sb.Grow(int(size) + 1) // one byte more: a file that grew shows without a copy
		n, err := io.Copy(&sb, io.LimitReader(r, max+1))
		if err != nil {
			return "", false, nil, 0, err
		}
		body := sb.String()
		if n <= max && isText(body) {
			return body, true, nil, n, nil
		}
		return "", false, strings.NewReader(body), n, nil
	}
	// A stream: read in chunks, then make the string once its size is
	// known (a growing buffer would copy itself at every step).
	var chunks [][]byte
	chunk := 64 << 10
	for n <= max {
		buf := make([]byte, min(int64(chunk), max+1-n))
		k, err := io.ReadFull(r, buf)
		chunks, n = append(chunks, buf[:k]), n+int64(k)
		if bytes.IndexByte(buf[:k], 0) >= 0 {
			break // not text: a blob
		}
		if err == io.EOF || err == io.ErrUnexpectedEOF {
			break
		}
		if err != nil {
			return "", false, nil, 0, err
		}
		chunk = min(2*chunk, 4<<20)
	}
	if n > max || bytes.IndexByte(chunks[len(chunks)-1], 0) >= 0 {
		readers := make([]io.Reader, len(chunks))
		for i, c := range chunks {
			readers[i] = bytes.NewReader(c)
		}
		return "", false, io.MultiReader(readers...), n, nil
	}
	var sb strings.Builder
	sb.Grow(int(n))
	for _, c := range chunks {
		sb.Write(c)
	}
	body = sb.String()
	if n >= 8<<20 {
		// The chunks are garbage now: hand their memory back before the
		// message is encoded, so that the body is held once, not twice.
		chunks = nil
		debug.FreeOSMemory()
	}
	if !isText(body) {
		return "", false, strings.NewReader(body), n, nil
	}
	return body, true, nil, n, nil
}

// isText reports whether s can be a message's body: UTF-8 without NUL
// bytes.
func isText(s string) bool { return utf8.ValidString(s) && strings.IndexByte(s, 0) < 0 }

// growFor makes room in b for msgs as JSON when they carry large
// content, so that encoding them never copies the output built so far:
// a buffer that grows copies itself at every step, and each copy it
// leaves behind adds to the process's peak memory.
func growFor(b []byte, msgs ...*inbox.Message) []byte {
	n := 0
	for _, m := range msgs {
		if m != nil {
			n += len(m.Body) + len(m.PayloadJSON)
		}
	}
	if n < 1<<20 {
		return b
	}
	need := 64 << 10 // the rest of the response
	for _, m := range msgs {
		if m != nil {
			need += m.JSONSize()
		}
	}
	return slices.Grow(b, need)
}

// releaseLarge hands the memory a large message's writing used (its log
// line, its file's encoding: garbage once the call returned) back to
// the system before the response is built, so that the body is held at
// most twice (the message and its output), not three or four times.
func releaseLarge(m *inbox.Message) {
	if m != nil && len(m.Body)+len(m.PayloadJSON) >= 8<<20 {
		debug.FreeOSMemory()
	}
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
