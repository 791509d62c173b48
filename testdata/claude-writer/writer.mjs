// Appends N entries to a Claude Code inbox file as Claude Code's
// teammateMailbox does: the file created as [] if missing, a lock taken
// with proper-lockfile (retries with back-off, stale after 10 s), re-read,
// append {from,text,summary,timestamp,read:false}, write, unlock.
//
//   node writer.mjs INBOX_FILE FROM PREFIX N
import fs from "node:fs";
import lockfile from "proper-lockfile";

const [file, from, prefix, n] = process.argv.slice(2);
const LOCK = { retries: { retries: 10, minTimeout: 5, maxTimeout: 100 }, stale: 10000 };

try {
  fs.writeFileSync(file, "[]", { flag: "wx", mode: 0o600 });
} catch (e) {
  if (e.code !== "EEXIST") throw e;
}
for (let i = 1; i <= Number(n); i++) {
  let release;
  for (;;) {
    try {
      release = await lockfile.lock(file, LOCK);
      break;
    } catch (e) {
      if (e.code !== "ELOCKED") throw e;
    }
  }
  try {
    const entries = JSON.parse(fs.readFileSync(file, "utf8") || "[]");
    entries.push({ from, text: `${prefix}-${i}`, summary: `${prefix} ${i}`, timestamp: new Date().toISOString(), read: false });
    const tmp = `${file}.${process.pid}.tmp`;
    fs.writeFileSync(tmp, JSON.stringify(entries, null, 2), { mode: 0o600 });
    fs.renameSync(tmp, file);
  } finally {
    await release();
  }
}
