package inbox

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"
)

// BlobStager is where NewMessage puts content too large to keep inline:
// the backend's blob store.
type BlobStager interface {
	StageBlob(field string, r io.Reader) (*Blob, error)
	// BlobArtifact is the artifact a message carries for a blob.
	BlobArtifact(b *Blob) ArtifactInput
	// DiscardBlob drops a staged blob that no message took.
	DiscardBlob(b *Blob)
}

// NewMessage validates c and builds an unsaved message from it: the
// summary (defSummary, a typed message's content, or the body's first
// line when c has none), artifacts, and seed 002's fields. A body or
// payload larger than MaxInline is staged as a blob with bs. The blobs of
// the message (staged here or given in c) are the caller's to discard
// once the message is committed or refused; on error they are discarded.
func NewMessage(now time.Time, from, to, kind string, c Content, defSummary string, bs BlobStager) (*Message, []*Blob, error) {
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
		b, err := bs.StageBlob("body", strings.NewReader(body))
		if err != nil {
			return fail(err)
		}
		blobs, body = append(slices.Clip(blobs), b), ""
	} else if err := ValidateText("body", body, MaxInline); err != nil {
		return fail(err)
	}
	payload, err := ValidJSON("payload_json", c.PayloadJSON, "{}", 0)
	if err != nil {
		return fail(err)
	}
	if len(payload) > MaxInline {
		b, err := bs.StageBlob("payload_json", bytes.NewReader(payload))
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
