package inbox

import "time"

// Limits on what the store accepts. They keep every file and every event
// line bounded; see docs/FORMAT.md.
const (
	MaxNameLen     = 64        // agent names
	MaxIDLen       = 100       // thread, message, run and task ids
	MaxSubjectLen  = 1000      // bytes
	MaxSummaryLen  = 2000      // bytes
	MaxBodyLen     = MaxInline // bytes inline; a larger body becomes a blob
	MaxPayloadLen  = MaxInline // bytes inline; a larger payload becomes a blob
	MaxMetadataLen = 256 << 10 // an artifact's metadata
	MaxArtifacts   = 100
	MaxPathLen     = 4096
	MaxLeaseSecs   = 7 * 24 * 3600
	MaxIdemKeyLen  = 200
)

// MaxInline is the largest body, payload or task output stored inline in
// a message; anything larger is stored as a blob.
const MaxInline = 64 << 20

const timeLayout = "2006-01-02T15:04:05.000000Z"

// FormatTime renders t as fixed-width UTC RFC 3339 with microseconds, so
// that string order is time order.
func FormatTime(t time.Time) string { return t.UTC().Format(timeLayout) }

// ParseTime parses a timestamp the store wrote (RFC 3339).
func ParseTime(s string) (time.Time, error) { return time.Parse(time.RFC3339Nano, s) }
