package inbox_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/inbox-dev/inbox"
	"github.com/inbox-dev/inbox/internal/jsonrec/jsonrectest"
	"github.com/inbox-dev/inbox/internal/testproc"
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

func sampleMessage() *inbox.Message {
	return &inbox.Message{MessageID: "m-0002", ThreadID: "t-0001", Seq: 2, FromAgent: "worker", ToAgent: "lead",
		Recipients: []string{"lead", "reviewer"}, Kind: "reply", Type: "result", Summary: "done: the build is \"green\"",
		Body:        strings.Repeat("The build passed.\n\tAll \"tests\" ran — ok. ", 24),
		PayloadJSON: json.RawMessage(`{"ok":true,"n":[1,2,3]}`), CreatedAt: "2026-11-23T04:30:00.000000Z", EventID: 1234,
		Artifacts: []inbox.Artifact{{ArtifactID: "a-1", MessageID: "m-0002", Path: "out/log.txt", Kind: "file",
			MetadataJSON: json.RawMessage(`{}`), CreatedAt: "2026-11-23T04:30:00.000000Z"}},
		RequestID: "r-1"}
}

func sampleThread() *inbox.Thread {
	return &inbox.Thread{ThreadID: "t-0001", RunID: "run-1", TaskID: "task-1", Subject: "build the thing", CreatedBy: "lead",
		AssignedTo: "worker", Recipients: []string{"worker", "reviewer"}, Status: "done", Priority: "normal",
		LatestMessageID: "m-0002", CreatedAt: "2026-11-23T04:00:00.000000Z", UpdatedAt: "2026-11-23T04:30:00.000000Z",
		MessageCount: 2, LastEventID: 1234}
}

func BenchmarkMessageEncode(b *testing.B) {
	testproc.BenchEncode(b, sampleMessage(), (*inbox.Message).AppendJSON)
}

func BenchmarkMessageDecode(b *testing.B) {
	testproc.BenchDecode(b, sampleMessage().AppendJSON(nil), (*inbox.Message).DecodeJSON)
}

func BenchmarkThreadEncode(b *testing.B) {
	testproc.BenchEncode(b, sampleThread(), (*inbox.Thread).AppendJSON)
}

func BenchmarkThreadDecode(b *testing.B) {
	testproc.BenchDecode(b, sampleThread().AppendJSON(nil), (*inbox.Thread).DecodeJSON)
}
