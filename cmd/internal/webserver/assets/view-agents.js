// view-agents.js: every agent with its state, the leases it holds (time
// left against length, fencing token), mailbox, debts, teams; agents that
// cannot stop (a live lease or mail waiting) flagged.

import * as api from './api.js';
import {agentLink, empty, h, leaseBar, stateBadge, statusBadge, threadLink, when} from './dom.js';

const ORDER = {working: 0, waiting: 1, idle: 2, gone: 3};

// leases caches each held thread's lease, subject and status; an event on
// the thread drops its entry.
const leases = new Map();

function cannotStop(a) {
  const why = [];
  const n = (a.live_leases || []).length;
  if (n) why.push(n === 1 ? 'holds a lease' : `holds ${n} leases`);
  if (a.mailbox_depth > 0) why.push(a.mailbox_depth === 1 ? 'has 1 message waiting' : `has ${a.mailbox_depth} messages waiting`);
  return why;
}

function leaseCell(tid) {
  const held = leases.get(tid);
  const box = h('div', {class: 'holds', 'data-lease-thread': tid},
    h('div', {class: 'holds-title'}, threadLink(tid, held && held.subject ? held.subject : null), held && held.status ? statusBadge(held.status) : null));
  if (held && held.lease) box.appendChild(leaseBar(held.lease));
  else if (held === undefined) box.appendChild(h('div', {class: 'lease lease-loading', 'aria-hidden': 'true'}, h('div', {class: 'lease-track'})));
  return box;
}

function row(a) {
  const stuck = cannotStop(a);
  const owes = (a.unacknowledged || []).length;
  const held = a.live_leases || [];
  return h('tr', {'data-agent': a.agent, class: stuck.length ? 'stuck' : null},
    h('th', {scope: 'row', 'data-label': 'Agent'},
      h('div', {class: 'agent-cell'},
        h('span', {class: 'agent-title'}, agentLink(a.agent)),
        stateBadge(a.state),
        stuck.length ? h('span', {class: 'flag', title: `cannot stop: ${stuck.join(', ')}`, 'data-flag': 'cannot-stop'}, 'cannot stop') : null),
      a.state === 'idle' && (a.idle_reason || a.idle_since)
        ? h('div', {class: 'sub muted'}, a.idle_reason ? `idle: ${a.idle_reason}` : 'idle', a.idle_since ? [' · ', when(a.idle_since, 'since')] : null)
        : null),
    h('td', {'data-label': 'Holds', class: 'col-holds'}, held.length ? held.map(leaseCell) : h('span', {class: 'muted'}, '—')),
    h('td', {'data-label': 'Mailbox', class: 'num'}, a.mailbox_depth ? h('span', {class: 'pill pill-mail', title: 'messages waiting in its mailbox'}, String(a.mailbox_depth)) : h('span', {class: 'muted'}, '0')),
    h('td', {'data-label': 'Owes', class: 'num'}, owes ? h('span', {class: 'pill pill-owe', title: `acknowledgments it owes: ${(a.unacknowledged || []).join(', ')}`}, `${owes} ack${owes > 1 ? 's' : ''}`) : h('span', {class: 'muted'}, '—')),
    h('td', {'data-label': 'Open threads', class: 'num'}, a.open_threads ? h('a', {href: `#/threads?agent=${encodeURIComponent(a.agent)}`}, String(a.open_threads)) : h('span', {class: 'muted'}, '0')),
    h('td', {'data-label': 'Teams'}, (a.teams || []).length ? (a.teams || []).map((t) => h('a', {class: 'chip', href: `#/teams`}, t)) : h('span', {class: 'muted'}, '—')),
    h('td', {'data-label': 'Last seen', class: 'nowrap'}, when(a.last_seen), a.last_activity && a.last_activity !== a.last_seen ? h('div', {class: 'sub muted'}, when(a.last_activity, 'active')) : null));
}

function tiles(list) {
  const count = (st) => list.filter((a) => a.state === st).length;
  const stuck = list.filter((a) => cannotStop(a).length).length;
  const t = (label, n, cls, title) => h('div', {class: `tile ${cls}`, title}, h('span', {class: 'tile-n'}, String(n)), h('span', {class: 'tile-label'}, label));
  return h('div', {class: 'tiles'},
    t('working', count('working'), 'tile-working', 'holding a lease and making progress'),
    t('waiting', count('waiting'), 'tile-waiting', 'blocked in wait-reply, receive or a question'),
    t('idle', count('idle'), 'tile-idle', 'nothing held'),
    t('gone', count('gone'), 'tile-gone', 'not seen for long'),
    t('cannot stop', stuck, 'tile-stuck', 'they hold a lease or have mail waiting'));
}

async function fillLeases(root, list, ctx) {
  const want = [...new Set(list.flatMap((a) => a.live_leases || []))].filter((tid) => !leases.has(tid));
  const queue = want.slice();
  const worker = async () => {
    while (queue.length) {
      const tid = queue.shift();
      try {
        const v = await api.get(api.threadPath(tid));
        leases.set(tid, {lease: v.lease || null, subject: (v.thread || {}).subject || '', status: (v.thread || {}).status || ''});
      } catch {
        leases.set(tid, null);
      }
      if (!ctx.live()) return;
      for (const box of root.querySelectorAll(`[data-lease-thread="${CSS.escape(tid)}"]`)) box.replaceWith(leaseCell(tid));
    }
  };
  await Promise.all(Array.from({length: Math.min(6, queue.length)}, worker));
}

export const agentsView = {
  title: () => 'Agents',
  relevant(events) {
    for (const e of events) if (e.thread_id) leases.delete(e.thread_id);
    return true;
  },
  async show(root, route, ctx) {
    const data = await api.get('/api/agents');
    if (!ctx.live()) return;
    const list = (data.agents || []).slice().sort((a, b) => (ORDER[a.state] ?? 9) - (ORDER[b.state] ?? 9) || a.agent.localeCompare(b.agent));
    const filter = h('input', {type: 'search', id: 'agents-filter', 'data-keep': 'agents-filter', placeholder: 'Filter by name or team', autocomplete: 'off'});
    const onlyStuck = h('input', {type: 'checkbox', id: 'agents-stuck', 'data-keep': 'agents-stuck'});
    const tbody = h('tbody');
    const table = h('div', {class: 'table-wrap'}, h('table', {class: 'table cards-on-phone agents'},
      h('caption', {class: 'sr-only'}, 'Agents, their state, leases, mail and debts'),
      h('thead', null, h('tr', null, ['Agent', 'Holds (lease time left · token)', 'Mailbox', 'Owes', 'Open', 'Teams', 'Last seen'].map((c) => h('th', {scope: 'col'}, c)))),
      tbody));
    const apply = () => {
      const f = filter.value.trim().toLowerCase();
      const rows = list.filter((a) => (!onlyStuck.checked || cannotStop(a).length) &&
        (!f || a.agent.toLowerCase().includes(f) || (a.teams || []).some((t) => t.toLowerCase().includes(f)) || a.state === f));
      tbody.replaceChildren(...rows.map(row));
      if (!rows.length) tbody.appendChild(h('tr', null, h('td', {colspan: '7', class: 'muted center'}, list.length ? 'No agent matches.' : '')));
    };
    filter.addEventListener('input', apply);
    onlyStuck.addEventListener('change', apply);
    ctx.swap(root,
      h('div', {class: 'view-head'}, h('h1', null, 'Agents'), h('p', {class: 'lede'}, 'Who is working, waiting, idle or gone; what each holds and owes.')),
      list.length ? [tiles(list),
        h('div', {class: 'toolbar'},
          h('label', {class: 'sr-only', for: 'agents-filter'}, 'Filter agents'), filter,
          h('label', {class: 'check'}, onlyStuck, ' only agents that cannot stop')),
        table] : empty('No agent has used this store yet.', 'Agents appear here as soon as they send, fetch or claim.'));
    apply();
    fillLeases(root, list, ctx); // progressively: the table is already useful without the bars
  },
};
