package inbox_test

import (
	"testing"

	"github.com/inbox-dev/inbox"
	"github.com/inbox-dev/inbox/internal/jsonrec/jsonrectest"
)

// The generated codecs of the domain records agree with encoding/json,
// encoding byte for byte and decoding value for value, errors included.
func TestRecordsAgreeWithEncodingJSON(t *testing.T) {
	jsonrectest.Check(t, (*inbox.Thread).AppendJSON, (*inbox.Thread).DecodeJSON)
	jsonrectest.Check(t, (*inbox.Message).AppendJSON, (*inbox.Message).DecodeJSON)
	jsonrectest.Check(t, (*inbox.Artifact).AppendJSON, (*inbox.Artifact).DecodeJSON)
	jsonrectest.Check(t, (*inbox.Lease).AppendJSON, (*inbox.Lease).DecodeJSON)
	jsonrectest.Check(t, (*inbox.Cursor).AppendJSON, (*inbox.Cursor).DecodeJSON)
	jsonrectest.Check(t, (*inbox.Event).AppendJSON, (*inbox.Event).DecodeJSON)
	jsonrectest.Check(t, (*inbox.Origin).AppendJSON, (*inbox.Origin).DecodeJSON)
}

func FuzzRecordDecode(f *testing.F) {
	for _, s := range jsonrectest.Corpus {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		jsonrectest.Decode(t, data, (*inbox.Thread).DecodeJSON)
		jsonrectest.Decode(t, data, (*inbox.Message).DecodeJSON)
		jsonrectest.Decode(t, data, (*inbox.Lease).DecodeJSON)
		jsonrectest.Decode(t, data, (*inbox.Cursor).DecodeJSON)
		jsonrectest.Decode(t, data, (*inbox.Event).DecodeJSON)
	})
}
