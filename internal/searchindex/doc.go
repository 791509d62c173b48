// Package searchindex is the inverted index behind spool's search (SPEC
// §16): for each term, the messages that hold it. A term is a word of
// the texts package inbox's Query.Match reads (inbox.SearchTexts, split
// by inbox.SearchWords, so the two read one way), or a value of the
// fields a search can narrow by (sender, recipient, kind, type), so that
// a search reads only the messages that can match.
//
// An index is one or more files (Segment), each an immutable table made
// to be read in place: load a file, check its checksum, and look terms
// up by binary search, without building anything per term or per
// document. Documents are numbered in event order, so a search walks the
// candidates newest first and stops once it has enough. A Builder makes
// a file from documents in memory; Merge joins two files, copying the
// older one's posting lists as they are.
//
// The package knows nothing of stores: spool decides which messages go
// in, where the files live, and how far into the event log each reaches
// (Covered).
//
// # Guarantees
//
//   - A term a message holds by Query.Match's rules is among its
//     MessageTerms, so candidates are a superset of the matches; the
//     caller still checks each candidate with Query.Match.
//   - Decode refuses (ErrDamaged) a file that is cut short, altered or of
//     another version: its last four bytes are a CRC-32C of the rest.
//
// # Caveats
//
//   - Positions are not kept: a phrase's candidates are the messages
//     holding all its words, in any order and in any of their texts.
//   - Offsets are 32-bit: a file holds at most 4 GiB of terms and of
//     postings (ErrTooLarge).
package searchindex
