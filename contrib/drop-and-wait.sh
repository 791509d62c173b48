#!/bin/sh
# drop-and-wait.sh INTAKE_DIR NAME PROMPT [TIMEOUT_SECONDS]
#
# What a cron job or CI hook does: drop a prompt descriptor into the inbox
# daemon's intake directory (write a temp file, then rename it into place,
# so the daemon never reads half a file), wait for its .outcome, print it,
# and exit 0 if the thread ended done, 1 if it failed or was cancelled or
# the descriptor was refused, 2 on timeout.
set -eu
dir=$1 name=$2 prompt=$3 timeout=${4:-3600}
f="$dir/$name.task.json"
tmp="$dir/.$name.tmp"
rm -f "$f.result" "$f.outcome" "$f.processed" "$f.failed"
# JSON-escape the prompt with the help of the standard tools.
esc=$(printf '%s' "$prompt" | sed -e 's/\\/\\\\/g' -e 's/"/\\"/g' | awk 'BEGIN{ORS="\\n"} {print}' | sed 's/\\n$//')
printf '{"version":1,"kind":"prompt","prompt":"%s"}\n' "$esc" >"$tmp"
mv "$tmp" "$f"
waited=0
until [ -e "$f.outcome" ] || [ -e "$f.failed" ]; do
	[ "$waited" -ge "$timeout" ] && { echo "timed out waiting for $f.outcome" >&2; exit 2; }
	sleep 1
	waited=$((waited + 1))
done
if [ -e "$f.failed" ]; then
	cat "$f.result" >&2
	exit 1
fi
cat "$f.outcome"
grep -q '"ok": true' "$f.outcome"
