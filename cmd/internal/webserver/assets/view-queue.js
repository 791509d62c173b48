// view-queue.js: the task queue per owner: queued, running (age against
// timeout) and finished tasks with their result or failure and the tail of
// their partial output (read from the task's thread when opened).

import * as api from './api.js';
import {agentLink, duration, empty, h, runBar, shortId, statusBadge, threadLink, when} from './dom.js';

const FINISHED_SHOWN = 20;
const TAIL = 4000;

// outcomes caches a finished task's result message: it never changes.
const outcomes = new Map();
const showAll = new Set();

async function outcome(threadId) {
  if (outcomes.has(threadId)) return outcomes.get(threadId);
  const v = await api.get(api.threadPath(threadId));
  const msgs = v.messages || [];
  const res = [...msgs].reverse().find((m) => m.kind === 'result') || msgs[msgs.length - 1] || null;
  outcomes.set(threadId, res);
  return res;
}

function outcomeBody(m, task) {
  if (!m) return h('p', {class: 'muted'}, 'No result message.');
  const p = m.payload_json || {};
  const failed = p.success === false || task.success === false;
  const out = [];
  out.push(h('p', {class: failed ? 'item-error' : 'result-summary'}, failed ? (p.error || m.summary || 'failed') : (m.summary || 'done')));
  const text = failed ? p.partial_output : m.body;
  if (text) {
    const tail = String(text);
    out.push(h('div', {class: 'tail-head muted small'}, failed ? 'partial output' : 'output',
      tail.length > TAIL ? ` (last ${TAIL} of ${tail.length} characters)` : '',
      p.partial_output_truncated ? ' · truncated by the runner' : ''));
    out.push(h('pre', {class: 'tail'}, tail.length > TAIL ? tail.slice(-TAIL) : tail));
  }
  if (p.partial_output_blob || p.output_blob) {
    const ref = String(p.partial_output_blob || p.output_blob).split('/').pop();
    out.push(h('a', {class: 'download', href: `/api/blobs/${encodeURIComponent(ref)}`, download: ref.slice(0, 12)}, 'download the whole output'));
  }
  return out;
}

function finishedRow(t) {
  const ok = t.success !== false && t.status !== 'failed';
  const det = h('details', {class: 'task-outcome', 'data-keep': `task-${t.thread_id || t.name}`},
    h('summary', null,
      h('span', {class: `result-mark ${ok ? 'ok' : 'bad'}`, 'aria-label': ok ? 'succeeded' : 'failed'}, ok ? '✓' : '✗'),
      h('span', {class: 'task-name'}, t.name),
      statusBadge(t.status),
      h('span', {class: 'muted small'}, 'finished ', when(t.finished_at))),
    h('div', {class: 'outcome-box'}, h('p', {class: 'muted'}, 'loading…')));
  det.addEventListener('toggle', async () => {
    if (!det.open || !t.thread_id || det.dataset.loaded) return;
    const box = det.querySelector('.outcome-box');
    try {
      box.replaceChildren(...[outcomeBody(await outcome(t.thread_id), t)].flat(), h('p', {class: 'small'}, threadLink(t.thread_id, 'open the thread')));
      det.dataset.loaded = 'true';
    } catch (err) {
      box.replaceChildren(h('p', {class: 'error-box small'}, err.message));
    }
  });
  return h('li', {class: `task task-finished ${ok ? 'ok' : 'bad'}`, 'data-thread-id': t.thread_id || null, 'data-task': t.name}, det);
}

function runningRow(t) {
  return h('li', {class: 'task task-running', 'data-thread-id': t.thread_id || null, 'data-task': t.name},
    h('div', {class: 'task-line'}, h('span', {class: 'spinner', 'aria-hidden': 'true'}), h('span', {class: 'task-name'}, t.name),
      t.thread_id ? threadLink(t.thread_id) : null, t.parent && t.parent !== t.owner ? h('span', {class: 'muted small'}, 'reports to ', agentLink(t.parent)) : null),
    runBar(t.started_at, t.timeout_seconds));
}

function queuedRow(t) {
  return h('li', {class: 'task task-queued', 'data-thread-id': t.thread_id || null, 'data-task': t.name},
    h('div', {class: 'task-line'}, h('span', {class: 'task-name'}, t.name),
      h('span', {class: 'muted small'}, 'queued ', when(t.created_at)),
      t.timeout_seconds ? h('span', {class: 'chip'}, `timeout ${duration(t.timeout_seconds)}`) : null,
      t.thread_id ? threadLink(t.thread_id, shortId(t.thread_id)) : null));
}

function lane(title, cls, tasks, row, extra) {
  return h('div', {class: `lane ${cls}`},
    h('h3', null, title, h('span', {class: 'count-pill'}, String(tasks.length))),
    tasks.length ? h('ul', {class: 'tasks'}, tasks.map(row)) : h('p', {class: 'muted small'}, 'none'),
    extra || null);
}

export const queueView = {
  title: () => 'Queue',
  async show(root, route, ctx) {
    const data = await api.get('/api/queue');
    if (!ctx.live()) return;
    const owners = new Map();
    const add = (t, where) => {
      const o = t.owner || t.parent || '?';
      if (!owners.has(o)) owners.set(o, {queued: [], running: [], finished: []});
      owners.get(o)[where].push(t);
    };
    for (const t of data.queued || []) add(t, 'queued');
    for (const t of data.running || []) add(t, 'running');
    for (const t of data.finished || []) add(t, 'finished');
    const byTime = (k) => (a, b) => String(b[k] || '').localeCompare(String(a[k] || ''));
    const total = (data.queued || []).length + (data.running || []).length + (data.finished || []).length;
    ctx.swap(root,
      h('div', {class: 'view-head'}, h('h1', null, 'Queue'),
        h('p', {class: 'lede'}, `${(data.queued || []).length} queued · ${(data.running || []).length} running · ${(data.finished || []).length} finished`)),
      total
        ? [...owners.entries()].sort((a, b) => a[0].localeCompare(b[0])).map(([owner, g]) => {
          const fin = g.finished.slice().sort(byTime('finished_at'));
          const all = showAll.has(owner);
          let more = null;
          if (fin.length > FINISHED_SHOWN && !all) {
            more = h('button', {type: 'button', class: 'btn btn-quiet'}, `Show all ${fin.length}`);
            more.addEventListener('click', () => {
              showAll.add(owner);
              ctx.refreshNow();
            });
          }
          return h('section', {class: 'block owner', 'data-agent': owner},
            h('div', {class: 'block-head'}, h('h2', null, 'Tasks of ', agentLink(owner))),
            h('div', {class: 'lanes'},
              lane('Queued', 'lane-queued', g.queued.slice().sort(byTime('created_at')).reverse(), queuedRow),
              lane('Running', 'lane-running', g.running.slice().sort(byTime('started_at')), runningRow),
              lane('Finished', 'lane-finished', all ? fin : fin.slice(0, FINISHED_SHOWN), finishedRow, more)));
        })
        : empty('No tasks.', 'inbox push queues a task for a sub-agent; inbox run starts them.'));
  },
};
