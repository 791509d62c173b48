// Package inbox is the domain of the coordination bus: its records
// (threads, messages, leases, events, read cursors, tasks, agents), the
// rules they obey (names, kinds, statuses, limits), the errors an
// operation returns, with their codes, and Bus, the interface through
// which every front-end (the CLI, the daemon, the queue runner) performs
// the operations of SPEC §4–§8 on a backend.
//
// A backend implements Bus: package spool on a directory tree. Package
// bustest is the conformance suite a backend runs in its own tests.
//
// Library code speaks in fields and rules: an *Error names the field at
// fault (snake_case, as in the JSON records) and the rule it broke; only
// the command layer renders a field as a --flag.
package inbox

//go:generate go run ./internal/recordgen -out records_gen.go Thread Message Lease Cursor Event Origin TaskRunner
