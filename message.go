package inbox

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/inbox-dev/inbox/internal/jsonrec"
)

// BlobStager is where NewMessage puts content too large to keep inline:
// the backend's blob store.
type BlobStager interface {
	StageBlob(ctx context.Context, field string, r io.Reader) (*Blob, error)
	// BlobArtifact is the artifact a message carries for a blob.
	BlobArtifact(b *Blob) ArtifactInput
	// DiscardBlob drops a staged blob that no message took.
	DiscardBlob(b *Blob)
}

// DefaultMaxBlob is the largest body, payload or task output a store
// takes when its maker set no maximum (SPEC §8 "Input without end is
// bounded"): a store records its own (inbox init --max-blob).
const DefaultMaxBlob = 1 << 30

// SizeChecker is a BlobStager whose store bounds what a message carries
// (SPEC §8 "Input without end is bounded"). CheckSize refuses (with
// TooLarge) n bytes of field, held in memory and to be stored in the
// message itself: more than the store's maximum, or than its file
// system has room for. Content staged as a blob is bounded by
// StageBlob, which stops reading past the limit.
type SizeChecker interface {
	CheckSize(field string, n int64) error
}

// checkSize asks bs, when it bounds content, whether n bytes of field
// may be stored.
func checkSize(bs BlobStager, field string, n int) error {
	if sc, ok := bs.(SizeChecker); ok {
		return sc.CheckSize(field, int64(n))
	}
	return nil
}

// TooLarge refuses n bytes of field (n < 0: an amount not known, read
// past the limit and no further) for being over limit bytes, where
// what names the limit ("this store's maximum (max_blob)", "the free
// space ..."), and remedy says what else raises it. The error is
// ErrInvalidInput, code too_large; it says what to do instead.
func TooLarge(field string, n, limit int64, what, remedy string) *Error {
	size := "is larger than"
	if n >= 0 {
		size = "is " + sizeAndBytes(n) + ", over"
	}
	return &Error{Code: "too_large", Field: field, Err: ErrInvalidInput, Rule: fmt.Sprintf(
		"%s %s of %s: store the content in a file and attach its path instead ({artifact}: the path is stored, the file is not copied), or %s",
		size, what, sizeAndBytes(limit), remedy)}
}

// sizeAndBytes is n for people with its exact count ("1 MiB (1048576
// bytes)", "57.2 MiB (60000000 bytes)"), or the count alone when the
// short form would hide the difference ("1048577 bytes", not "1.0 MiB").
func sizeAndBytes(n int64) string {
	s := FormatSize(n)
	switch {
	case strings.HasSuffix(s, " bytes") || strings.HasSuffix(s, " byte"):
		return s
	case strings.Contains(s, ".0 "):
		return fmt.Sprintf("%d bytes", n)
	}
	return fmt.Sprintf("%s (%d bytes)", s, n)
}

// sizeUnits are the units ParseSize knows, with their values.
var sizeUnits = map[string]int64{
	"": 1, "b": 1,
	"k": 1 << 10, "kib": 1 << 10, "kb": 1e3,
	"m": 1 << 20, "mib": 1 << 20, "mb": 1e6,
	"g": 1 << 30, "gib": 1 << 30, "gb": 1e9,
	"t": 1 << 40, "tib": 1 << 40, "tb": 1e12,
}

// ParseSize reads a size in bytes as field: a positive integer, with a
// unit or not. K, M, G and T (or KiB, MiB, GiB, TiB) are powers of 1024;
// KB, MB, GB and TB powers of 1000; case does not matter, and a space
// may separate number and unit: 1073741824, 512MiB, 1G, 64 KB.
func ParseSize(field, s string) (int64, error) {
	t := strings.TrimSpace(s)
	i := 0
	for i < len(t) && t[i] >= '0' && t[i] <= '9' {
		i++
	}
	unit, ok := sizeUnits[strings.ToLower(strings.TrimSpace(t[i:]))]
	if i == 0 || !ok {
		return 0, Invalid(field, "is %q, not a size: give a number of bytes (1073741824) or a number and a unit (512MiB, 1GiB; K, M, G, T are powers of 1024, KB, MB, GB, TB powers of 1000)", s)
	}
	n, err := strconv.ParseInt(t[:i], 10, 64)
	if err != nil || n > math.MaxInt64/unit {
		return 0, Invalid(field, "is %q, more than inbox can count (%d bytes)", s, int64(math.MaxInt64))
	}
	if n == 0 {
		return 0, Invalid(field, "is %q: a size must be at least one byte", s)
	}
	return n * unit, nil
}

// FormatSize renders n bytes for people: a whole number of the largest
// binary unit it is a multiple of (1 GiB, 512 MiB, 1000 bytes), else one
// decimal of the largest unit it reaches (57.2 MiB).
func FormatSize(n int64) string {
	units := []struct {
		name string
		size int64
	}{{"TiB", 1 << 40}, {"GiB", 1 << 30}, {"MiB", 1 << 20}, {"KiB", 1 << 10}}
	for _, u := range units {
		if n >= u.size && n%u.size == 0 {
			return fmt.Sprintf("%d %s", n/u.size, u.name)
		}
	}
	for _, u := range units {
		if n >= u.size {
			return fmt.Sprintf("%.1f %s", float64(n)/float64(u.size), u.name)
		}
	}
	if n == 1 {
		return "1 byte"
	}
	return fmt.Sprintf("%d bytes", n)
}

// JSONSize is how many bytes m.AppendJSON writes, at most (exactly, but
// for a payload that is not compact): what a caller encoding a large
// message makes room for first, so that its buffer never copies itself.
func (m *Message) JSONSize() int {
	c := *m
	c.Body, c.PayloadJSON = "", nil
	return len(c.AppendJSON(nil)) - len(`""`) - len("null") + jsonrec.StringLen(m.Body) + max(len(m.PayloadJSON), len("null"))
}

// NewMessage validates c and builds an unsaved message from it: the
// summary (defSummary, a typed message's content, or the body's first
// line when c has none), artifacts, and seed 002's fields. A body or
// payload larger than MaxInline is staged as a blob with bs. The blobs of
// the message (staged here or given in c) are the caller's to discard
// once the message is committed or refused; on error they are discarded.
func NewMessage(ctx context.Context, now time.Time, from, to, kind string, c Content, defSummary string, bs BlobStager) (*Message, []*Blob, error) {
	blobs := c.Blobs
	fail := func(err error) (*Message, []*Blob, error) {
		for _, b := range blobs {
			bs.DiscardBlob(b)
		}
		return nil, nil, err
	}
	if err := ValidateText("summary", c.Summary, MaxSummaryLen); err != nil {
		return fail(err)
	}
	body := c.Body
	if len(body) > MaxInline {
		if err := ValidateText("body", body, len(body)); err != nil {
			return fail(err)
		}
		b, err := bs.StageBlob(ctx, "body", strings.NewReader(body))
		if err != nil {
			return fail(err)
		}
		blobs, body = append(slices.Clip(blobs), b), ""
	} else if err := checkSize(bs, "body", len(body)); err != nil {
		return fail(err)
	} else if err := ValidateText("body", body, MaxInline); err != nil {
		return fail(err)
	}
	if len(c.PayloadJSON) <= MaxInline {
		if err := checkSize(bs, "payload_json", len(c.PayloadJSON)); err != nil {
			return fail(err)
		}
	}
	payload, err := ValidJSON("payload_json", c.PayloadJSON, "{}", 0)
	if err != nil {
		return fail(err)
	}
	if len(payload) > MaxInline {
		b, err := bs.StageBlob(ctx, "payload_json", bytes.NewReader(payload))
		if err != nil {
			return fail(err)
		}
		blobs, payload = append(slices.Clip(blobs), b), json.RawMessage("{}")
	}
	if err := ValidateIdemKey(c.IdempotencyKey); err != nil {
		return fail(err)
	}
	summary := strings.TrimSpace(c.Summary)
	if summary == "" {
		summary = defSummary
	}
	if summary == "" && body == "" && c.Type != "" {
		// A typed message says what it is about in its content.
		if summary = ContentSummary(payload); summary == "" {
			summary = c.Type
		}
	}
	if summary == "" {
		line, _, _ := strings.Cut(strings.TrimSpace(body), "\n")
		summary = Shorten(strings.TrimSpace(line), 200)
	}
	if summary == "" && len(blobs) > 0 {
		summary = fmt.Sprintf("%s: %d bytes, stored as %s", blobs[0].Field, blobs[0].Size, blobs[0].Ref())
	}
	mid := NewID("msg_", now)
	m := &Message{MessageID: mid, FromAgent: from, ToAgent: to, Kind: kind, Summary: summary,
		Body: body, PayloadJSON: payload, CreatedAt: FormatTime(now)}
	if err := typedFields(m, c, now); err != nil {
		return fail(err)
	}
	arts := c.Artifacts
	for _, b := range blobs {
		arts = append(slices.Clip(arts), bs.BlobArtifact(b))
	}
	c.Artifacts = arts
	if len(c.Artifacts) > MaxArtifacts {
		return fail(Invalid("artifact", "is given %d times; the limit is %d", len(c.Artifacts), MaxArtifacts))
	}
	for i, a := range c.Artifacts {
		if a.Path == "" {
			return fail(Invalid("artifact", "#%d: the path is empty", i+1))
		}
		if err := ValidateText("artifact", a.Path, MaxPathLen); err != nil {
			return fail(err)
		}
		kind := a.Kind
		if kind == "" {
			kind = "file"
		}
		if err := ValidateLabel("artifact_kind", kind); err != nil {
			return fail(err)
		}
		meta, err := ValidJSON("artifact_metadata_json", a.MetadataJSON, "{}", MaxMetadataLen)
		if err != nil {
			return fail(err)
		}
		m.Artifacts = append(m.Artifacts, Artifact{ArtifactID: NewID("art_", now), MessageID: mid,
			Path: a.Path, Kind: kind, MetadataJSON: meta, CreatedAt: m.CreatedAt})
	}
	return m, blobs, nil
}

// typedFields sets the seed-002 fields of m (SPEC §10) from c.
func typedFields(m *Message, c Content, now time.Time) error {
	if c.Type != "" {
		if err := ValidateType("type", c.Type); err != nil {
			return err
		}
		if !bytes.HasPrefix(m.PayloadJSON, []byte("{")) {
			return Invalid("content_json", "must be a JSON object (seed 002's content), not %s", Shorten(string(m.PayloadJSON), 40))
		}
	}
	m.Type = c.Type
	switch {
	case c.RequestID != "":
		if err := ValidateLabel("request_id", c.RequestID); err != nil {
			return err
		}
		m.RequestID = c.RequestID
	case c.Request:
		m.RequestID = NewID("req_", now)
	}
	if c.AckID != "" {
		if err := ValidateLabel("ack_id", c.AckID); err != nil {
			return err
		}
		m.AckID = c.AckID
	} else if c.AckRequired {
		m.AckID = m.MessageID
	}
	if c.Timestamp != "" {
		if err := ValidateLabel("timestamp", c.Timestamp); err != nil {
			return err
		}
		if c.Timestamp != m.CreatedAt {
			m.Timestamp = c.Timestamp
		}
	}
	if len(c.Extra) > 0 {
		extra, err := ValidJSON("extra", string(c.Extra), "", MaxMetadataLen)
		if err != nil {
			return err
		}
		if !bytes.HasPrefix(extra, []byte("{")) {
			return Invalid("extra", "must be a JSON object")
		}
		if string(extra) != "{}" {
			m.Extra = extra
		}
	}
	return nil
}
