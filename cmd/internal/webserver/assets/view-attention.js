// view-attention.js: what needs a person: blocked questions (answer them
// here), requests without a response, unacknowledged messages, agents gone
// while holding a lease, expired leases, failed tasks.

import * as api from './api.js';
import {answerForm, cancelButton} from './actions.js';
import {agentLink, duration, empty, h, icon, jsonText, shortId, threadLink, when} from './dom.js';

const KINDS = {
  blocked: {label: 'Blocked questions', one: 'blocked', verb: 'asked', tone: 'warn', help: 'A worker stopped and waits for an answer; answer it here and its wait-reply wakes.'},
  request: {label: 'Requests without a response', one: 'request', verb: 'asked', tone: 'warn', help: 'A request waits for its response.'},
  gone_with_lease: {label: 'Agents gone while holding a lease', one: 'gone with lease', verb: 'last seen', tone: 'alert', help: 'Nobody will finish these until the lease expires or the thread is cancelled.'},
  expired_lease: {label: 'Expired leases', one: 'lease expired', verb: 'expired', tone: 'alert', help: 'The holder stopped renewing.'},
  failed_task: {label: 'Failed tasks', one: 'task failed', verb: 'failed', tone: 'alert', help: 'A queued task ended in failure.'},
  unacknowledged: {label: 'Unacknowledged messages', one: 'unacknowledged', verb: 'sent', tone: 'info', help: 'Messages that asked for an ack and got none.'},
};
const ORDER = Object.keys(KINDS);

function since(it) {
  return it.waiting_since || it.asked_at || it.since || it.created_at || it.expired_at || it.finished_at || '';
}

function who(it) {
  return it.agent || it.holder || it.from_agent || it.from || '';
}

function ageWords(it) {
  const verb = (KINDS[it.kind] || {}).verb || 'since';
  const t = since(it);
  if (t) return when(t, verb);
  if (Number.isFinite(it.waiting_seconds)) return h('span', null, `waiting ${duration(it.waiting_seconds)}`);
  return null;
}

// question is what the item asks or says: a question object, else the
// summary and body the item carries.
function question(it) {
  const q = it.question || it.message || (it.summary || it.body ? {summary: it.summary, body: it.body} : null);
  if (!q || (!q.summary && !q.body)) return null;
  const failed = it.kind === 'failed_task' || it.kind === 'expired_lease' || it.kind === 'gone_with_lease';
  return h('blockquote', {class: `question${failed ? ' failure' : ''}`},
    q.summary ? h('p', {class: 'q-summary'}, q.summary) : null,
    q.body && q.body !== q.summary ? h('p', {class: 'q-body'}, q.body) : null);
}

function names(list) {
  return list.map((n, i) => [i ? ', ' : '', agentLink(n)]);
}

// facts says who is involved, in the words of the item's kind.
function facts(it) {
  const out = [];
  const agent = who(it);
  const owed = Array.isArray(it.waiting_on) ? it.waiting_on : it.must_answer ? [it.must_answer] : [];
  switch (it.kind) {
    case 'blocked':
    case 'request':
      if (agent) out.push(h('span', null, 'asked by ', agentLink(agent)));
      if (owed.length) out.push(h('span', {class: 'must'}, 'must answer: ', h('strong', null, names(owed))));
      break;
    case 'unacknowledged':
      if (agent) out.push(h('span', null, 'sent by ', agentLink(agent)));
      if (owed.length) out.push(h('span', {class: 'must'}, 'no ack yet from ', h('strong', null, names(owed))));
      break;
    case 'failed_task':
      if (agent) out.push(h('span', null, 'task ', h('code', null, it.task || it.name || agent)));
      if (owed.length) out.push(h('span', null, 'reported to ', names(owed)));
      out.push(h('a', {href: '#/queue'}, 'queue'));
      break;
    default:
      if (agent) out.push(h('span', null, 'holder ', agentLink(agent)));
      if (owed.length) out.push(h('span', null, 'waiting on ', names(owed)));
  }
  if (it.lease_token !== undefined) out.push(h('span', {class: 'muted'}, `token ${it.lease_token}`));
  if (it.expires_at && it.kind !== 'expired_lease') out.push(h('span', {class: 'muted'}, 'lease ', when(it.expires_at, 'expired')));
  if (it.message_id) out.push(h('code', {class: 'muted small', title: it.message_id}, shortId(it.message_id)));
  return out;
}

function item(it, ctx) {
  const k = KINDS[it.kind] || {one: it.kind || 'item', tone: 'info'};
  const tid = it.thread_id;
  const head = h('div', {class: 'item-head'},
    h('span', {class: `kind-tag tone-${k.tone}`}, k.one),
    tid ? threadLink(tid, it.subject || shortId(tid)) : null,
    h('span', {class: 'item-age muted'}, ageWords(it)));
  const f = facts(it);
  const err = it.error || it.failure;
  const actions = [];
  const open = tid && !['done', 'failed', 'cancelled'].includes(it.status);
  if (it.kind === 'blocked' && tid) actions.push(answerForm(tid, ctx, {extra: cancelButton(tid, ctx, it.subject)}));
  else if (open && ['request', 'gone_with_lease', 'expired_lease'].includes(it.kind)) actions.push(h('div', {class: 'form-actions'}, cancelButton(tid, ctx, it.subject)));
  return h('article', {class: `item tone-${k.tone}`, 'data-kind': it.kind || '', 'data-thread-id': tid || null},
    head,
    f.length ? h('div', {class: 'facts'}, f) : null,
    question(it),
    err && typeof err === 'string' ? h('p', {class: 'item-error'}, err) : null,
    it.partial_output ? h('pre', {class: 'tail'}, String(it.partial_output).slice(-2000)) : null,
    KINDS[it.kind] ? null : h('details', null, h('summary', null, 'all fields'), h('pre', {class: 'json'}, jsonText(it))),
    actions);
}

export const attentionView = {
  title: () => 'Needs attention',
  async show(root, route, ctx) {
    const data = await api.get('/api/attention');
    if (!ctx.live()) return;
    const items = data.items || [];
    const groups = new Map();
    for (const it of items) {
      if (!groups.has(it.kind)) groups.set(it.kind, []);
      groups.get(it.kind).push(it);
    }
    const kinds = [...groups.keys()].sort((a, b) => (ORDER.indexOf(a) + 1 || 99) - (ORDER.indexOf(b) + 1 || 99));
    const oldestFirst = (a, b) => (b.waiting_seconds || 0) - (a.waiting_seconds || 0);
    ctx.swap(root,
      h('div', {class: 'view-head'}, h('h1', null, 'Needs attention'),
        h('p', {class: 'lede'}, items.length ? `${items.length} item${items.length > 1 ? 's' : ''} only a person can clear, oldest first.` : 'Questions and stuck work that need a person.')),
      items.length
        ? kinds.map((kind) => h('section', {class: 'block', 'aria-labelledby': `att-${kind}`},
          h('div', {class: 'block-head'},
            h('h2', {id: `att-${kind}`}, icon('attention'), (KINDS[kind] || {label: kind}).label, h('span', {class: 'count-pill'}, String(groups.get(kind).length))),
            KINDS[kind] ? h('p', {class: 'muted small'}, KINDS[kind].help) : null),
          h('div', {class: 'items'}, groups.get(kind).slice().sort(oldestFirst).map((it) => item(it, ctx)))))
        : empty('Nothing needs you right now.', 'Blocked questions, unanswered requests, lost leases and failed tasks show up here the moment they happen.'));
  },
};
