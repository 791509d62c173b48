package spool

// maxEventSumLen is the length summaries are cut to in event lines.
const maxEventSumLen = 300
