// Package cli is inbox's command line: every command's flags, help and
// output (people's text or the --json shape), and the one place errors
// become exit codes. Commands talk to the store only through inbox.Bus.
// cmd/inbox runs it as the lean binary; cmd/inbox-mcp runs it with the MCP
// server (cmd/internal/mcpserver), which calls the same commands
// in-process through Invoke.
package cli
