#!/usr/bin/env bash
# threads.sh BIN DB N > FILE: creates N new threads for agent X through
# BIN's CLI (inbox or the SQLite reference) and prints their ids, one a
# line, for abtime's @@FILE arguments.
set -euo pipefail
bin=$1 db=$2 n=$3
for ((i = 0; i < n; i++)); do
	"$bin" send --db "$db" --json --from boss --to X --subject "t $i" --body b 2>/dev/null |
		grep -o '"thread_id":"thr_[a-z0-9]*"' | head -1 | cut -d'"' -f4
done
