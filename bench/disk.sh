#!/usr/bin/env bash
# disk.sh [N]: disk used per 1 KB message, inbox vs the SQLite reference.
# Sends N (default 1000) messages with 1 KB bodies into one thread and N
# into N new threads, through each CLI, and prints the bytes on disk per
# message (du of the store; for SQLite, the database file after close).
set -euo pipefail
N=${1:-1000}
here=$(cd "$(dirname "$0")/.." && pwd)
ref=${SQLITE_INBOX:-$here/../shared/bench/bin/sqlite-inbox}
inbox=$here/bin/inbox
[ -x "$inbox" ] || (cd "$here" && CGO_ENABLED=0 go build -o bin/inbox ./cmd/inbox)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
body=$(head -c 1024 /dev/zero | tr '\0' 'x')
measure() { # name binary db
	local name=$1 bin=$2 db=$3 t
	"$bin" init --db "$db" --json >/dev/null
	t=$("$bin" send --db "$db" --json --from a --to b --subject long | sed -n 's/.*"thread_id":"\([^"]*\)".*/\1/p')
	for ((i = 1; i < N; i++)); do "$bin" send --db "$db" --json --from a --to b --thread "$t" --body "$body" >/dev/null; done
	for ((i = 0; i < N; i++)); do "$bin" send --db "$db" --json --from a --to b --subject "s$i" --body "$body" >/dev/null; done
	local bytes
	bytes=$(du -sb --apparent-size "$db" | cut -f1)
	local used
	used=$(du -sk "$db" | cut -f1)
	printf '%-8s %8d messages  %10d bytes apparent (%6.0f B/msg)  %8d KiB allocated (%6.0f B/msg)\n' \
		"$name" $((2 * N)) "$bytes" "$(echo "$bytes / (2*$N)" | bc -l)" "$used" "$(echo "$used * 1024 / (2*$N)" | bc -l)"
}
measure inbox "$inbox" "$work/inbox"
if [ -x "$ref" ]; then
	measure sqlite "$ref" "$work/sqlite.db"
else
	echo "sqlite reference not built ($ref): run ../shared/bench/build.sh" >&2
fi
