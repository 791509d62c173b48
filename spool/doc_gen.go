package spool

//go:generate go run ../internal/recordgen -out records_gen.go logEvent leaseRecord header msgFile idemRecord formatInfo formatFields formatProbe blobMeta
