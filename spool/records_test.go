package spool

import (
	"testing"

	"github.com/inbox-dev/inbox/internal/jsonrec/jsonrectest"
)

// The generated codecs of the store's own records agree with
// encoding/json, encoding byte for byte (the format of every file already
// written) and decoding value for value, errors included.
func TestRecordsAgreeWithEncodingJSON(t *testing.T) {
	jsonrectest.Check(t, (*logEvent).appendJSON, (*logEvent).decodeJSON)
	jsonrectest.Check(t, (*leaseRecord).appendJSON, (*leaseRecord).decodeJSON)
	jsonrectest.Check(t, (*header).appendJSON, (*header).decodeJSON)
	jsonrectest.Check(t, (*msgFile).appendJSON, (*msgFile).decodeJSON)
	jsonrectest.Check(t, (*idemRecord).appendJSON, (*idemRecord).decodeJSON)
	jsonrectest.Check(t, (*formatInfo).appendJSON, (*formatInfo).decodeJSON)
	jsonrectest.Check(t, (*formatFields).appendJSON, (*formatFields).decodeJSON)
	jsonrectest.Check(t, (*formatProbe).appendJSON, (*formatProbe).decodeJSON)
	jsonrectest.Check(t, (*blobMeta).appendJSON, (*blobMeta).decodeJSON)
}

func FuzzRecordDecode(f *testing.F) {
	for _, s := range jsonrectest.Corpus {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		jsonrectest.Decode(t, data, (*logEvent).decodeJSON)
		jsonrectest.Decode(t, data, (*header).decodeJSON)
		jsonrectest.Decode(t, data, (*msgFile).decodeJSON)
		jsonrectest.Decode(t, data, (*leaseRecord).decodeJSON)
	})
}
