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
# JSON-escape the prompt with awk, byte by byte: quote and backslash, and
# every control character (TAB, CR, ESC, …) as JSON spells it; other bytes,
# UTF-8 included, pass as they are. Each line is a record, and the lines
# are joined with \n: printf's added newline makes a prompt's own trailing
# newline the last (empty) record's separator, so it is kept.
esc=$(printf '%s\n' "$prompt" | LC_ALL=C awk '
BEGIN {
	for (i = 1; i < 32; i++) code[sprintf("%c", i)] = sprintf("\\u%04x", i)
	code["\t"] = "\\t"; code["\r"] = "\\r"; code["\b"] = "\\b"; code["\f"] = "\\f"
	code["\""] = "\\\""; code["\\"] = "\\\\"
}
{
	if (NR > 1) printf "\\n"
	n = length($0)
	for (i = 1; i <= n; i++) {
		c = substr($0, i, 1)
		printf "%s", ((c in code) ? code[c] : c)
	}
}')
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
