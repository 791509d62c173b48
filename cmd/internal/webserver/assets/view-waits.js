// view-waits.js: who waits on whom, drawn as an SVG graph made here (no
// library): agents on a circle, an arrow from each waiter to the agent it
// waits on, and every cycle (a deadlock) in red, listed in words too.

import * as api from './api.js';
import {agentLink, empty, h, s, shortId, stateBadge, threadLink} from './dom.js';

const REASON = {blocked: 'blocked on an answer', request: 'request without response', wait_reply: 'in wait-reply', receive: 'in receive'};
const NODE_R = 24;

function cycleEdges(cycles) {
  const set = new Set();
  for (const c of cycles) for (let i = 0; i < c.length; i++) set.add(`${c[i]}\u0000${c[(i + 1) % c.length]}`);
  return set;
}

function layout(ids) {
  const n = ids.length;
  const pos = new Map();
  if (n === 1) {
    pos.set(ids[0], {x: 0, y: 0});
    return {pos, r: 0};
  }
  // Enough room on the circle for each node and its label.
  const r = Math.max(n === 2 ? 130 : 170, (n * (NODE_R * 2 + 110)) / (2 * Math.PI));
  const start = n === 2 ? Math.PI : -Math.PI / 2;
  ids.forEach((id, i) => {
    const a = start + (2 * Math.PI * i) / n;
    pos.set(id, {x: r * Math.cos(a), y: r * Math.sin(a)});
  });
  return {pos, r};
}

function graph(nodes, edges, cycles) {
  const state = new Map(nodes.map((n) => [n.id, n.state]));
  const inCycle = new Set(cycles.flat());
  const cyc = cycleEdges(cycles);
  // Agents on a cycle first, next to each other, so a deadlock reads as a loop.
  const ids = [...new Set([...cycles.flat(), ...edges.flatMap((e) => [e.from, e.to])])];
  const {pos, r} = layout(ids);
  const size = 2 * (r + NODE_R + 60);
  const svg = s('svg', {class: 'waits-graph', viewBox: `${-size / 2} ${-size / 2} ${size} ${size}`, role: 'img',
    'aria-label': `Wait graph: ${ids.length} agents, ${edges.length} waits, ${cycles.length} deadlock${cycles.length === 1 ? '' : 's'}`},
  s('defs', null,
    s('marker', {id: 'arrow', viewBox: '0 0 10 10', refX: '9', refY: '5', markerUnits: 'userSpaceOnUse', markerWidth: '13', markerHeight: '13', orient: 'auto-start-reverse'},
      s('path', {d: 'M0 0L10 5L0 10z', class: 'arrow'})),
    s('marker', {id: 'arrow-cycle', viewBox: '0 0 10 10', refX: '9', refY: '5', markerUnits: 'userSpaceOnUse', markerWidth: '13', markerHeight: '13', orient: 'auto-start-reverse'},
      s('path', {d: 'M0 0L10 5L0 10z', class: 'arrow arrow-cycle'}))));
  const edgeLayer = s('g', {class: 'edges'});
  const labelLayer = s('g', {class: 'edge-labels'});
  const pairCount = new Map();
  for (const e of edges) {
    const a = pos.get(e.from);
    const b = pos.get(e.to);
    if (!a || !b) continue;
    const key = `${e.from}\u0000${e.to}`;
    const k = pairCount.get(key) || 0;
    pairCount.set(key, k + 1);
    const bad = cyc.has(key);
    let d;
    let mid;
    if (e.from === e.to) {
      // Waiting on itself: a small loop above the node.
      d = `M${a.x - 10} ${a.y - NODE_R + 2} C${a.x - 40} ${a.y - NODE_R - 50} ${a.x + 40} ${a.y - NODE_R - 50} ${a.x + 10} ${a.y - NODE_R + 2}`;
      mid = {x: a.x, y: a.y - NODE_R - 42};
    } else {
      const dx = b.x - a.x;
      const dy = b.y - a.y;
      const len = Math.hypot(dx, dy) || 1;
      const ux = dx / len;
      const uy = dy / len;
      // Bend to the right of the direction of travel: A->B and B->A never overlap.
      const bend = 0.18 * len + k * 22;
      const cx = (a.x + b.x) / 2 + uy * bend;
      const cy = (a.y + b.y) / 2 - ux * bend;
      const sa = trim(a, {x: cx, y: cy}, NODE_R + 2);
      const sb = trim(b, {x: cx, y: cy}, NODE_R + 6);
      d = `M${sa.x.toFixed(1)} ${sa.y.toFixed(1)} Q${cx.toFixed(1)} ${cy.toFixed(1)} ${sb.x.toFixed(1)} ${sb.y.toFixed(1)}`;
      mid = {x: 0.25 * sa.x + 0.5 * cx + 0.25 * sb.x, y: 0.25 * sa.y + 0.5 * cy + 0.25 * sb.y};
    }
    const label = REASON[e.reason] || e.reason || 'waits';
    const path = s('path', {d, class: `edge edge-${e.reason || 'wait'}${bad ? ' edge-cycle' : ''}`, 'marker-end': bad ? 'url(#arrow-cycle)' : 'url(#arrow)'},
      s('title', null, `${e.from} waits on ${e.to}: ${label}${e.thread_id ? ' (' + e.thread_id + ')' : ''}`));
    edgeLayer.appendChild(e.thread_id ? s('a', {href: `#/thread/${encodeURIComponent(e.thread_id)}`}, path) : path);
    labelLayer.appendChild(s('text', {x: mid.x.toFixed(1), y: mid.y.toFixed(1), class: `edge-label${bad ? ' edge-label-cycle' : ''}`, 'text-anchor': 'middle', 'dominant-baseline': 'middle'}, e.reason || 'waits'));
  }
  const nodeLayer = s('g', {class: 'nodes'});
  for (const id of ids) {
    const p = pos.get(id);
    const st = state.get(id) || 'unknown';
    // The name goes outside the circle, away from the middle, where no arrow arrives.
    const len = Math.hypot(p.x, p.y);
    const ux = len ? p.x / len : 0;
    const uy = len ? p.y / len : 1;
    const lx = p.x + ux * (NODE_R + 8);
    const ly = p.y + uy * (NODE_R + 8) + (uy > 0.3 ? 12 : uy < -0.3 ? -2 : 5);
    const anchor = ux > 0.3 ? 'start' : ux < -0.3 ? 'end' : 'middle';
    nodeLayer.appendChild(s('a', {href: `#/threads?agent=${encodeURIComponent(id)}`, class: `node node-${st}${inCycle.has(id) ? ' node-cycle' : ''}`, 'data-agent': id},
      s('title', null, `${id} (${st})`),
      s('circle', {cx: p.x.toFixed(1), cy: p.y.toFixed(1), r: NODE_R}),
      s('text', {x: p.x.toFixed(1), y: p.y.toFixed(1), class: 'node-initial', 'text-anchor': 'middle', 'dominant-baseline': 'central'}, initials(id)),
      s('text', {x: lx.toFixed(1), y: ly.toFixed(1), class: 'node-label', 'text-anchor': anchor}, id)));
  }
  svg.append(edgeLayer, labelLayer, nodeLayer);
  // Fit the picture to what it holds: the circles, their names, any loop.
  let [x0, y0, x1, y1] = [Infinity, Infinity, -Infinity, -Infinity];
  for (const id of ids) {
    const p = pos.get(id);
    const len = Math.hypot(p.x, p.y);
    const ux = len ? p.x / len : 0;
    const w = 8 * String(id).length;
    x0 = Math.min(x0, p.x - NODE_R - (ux < -0.3 ? w + 10 : ux > 0.3 ? 0 : w / 2));
    x1 = Math.max(x1, p.x + NODE_R + (ux > 0.3 ? w + 10 : ux < -0.3 ? 0 : w / 2));
    y0 = Math.min(y0, p.y - NODE_R - 70);
    y1 = Math.max(y1, p.y + NODE_R + 30);
  }
  const m = 12;
  svg.setAttribute('viewBox', `${(x0 - m).toFixed(0)} ${(y0 - m).toFixed(0)} ${(x1 - x0 + 2 * m).toFixed(0)} ${(y1 - y0 + 2 * m).toFixed(0)}`);
  return svg;
}

function trim(from, toward, by) {
  const dx = toward.x - from.x;
  const dy = toward.y - from.y;
  const len = Math.hypot(dx, dy) || 1;
  return {x: from.x + (dx / len) * by, y: from.y + (dy / len) * by};
}

function initials(id) {
  const parts = String(id).split(/[^\p{L}\p{N}]+/u).filter(Boolean);
  if (parts.length >= 2) return (parts[0][0] + parts[1][0]).toUpperCase();
  return String(id).slice(0, 2).toUpperCase();
}

export const waitsView = {
  title: () => 'Who waits on whom',
  async show(root, route, ctx) {
    const data = await api.get('/api/waits');
    if (!ctx.live()) return;
    const nodes = data.nodes || [];
    const edges = data.edges || [];
    const cycles = data.cycles || [];
    const cyc = cycleEdges(cycles);
    const involved = new Set(edges.flatMap((e) => [e.from, e.to]));
    const others = nodes.filter((n) => !involved.has(n.id));
    const stateOf = new Map(nodes.map((n) => [n.id, n.state]));
    ctx.swap(root,
      h('div', {class: 'view-head'}, h('h1', null, 'Who waits on whom'),
        h('p', {class: 'lede'}, 'An arrow goes from an agent to the agent it waits on; a loop of arrows is a deadlock: nobody in it can move.')),
      cycles.length
        ? h('section', {class: 'block deadlocks', role: 'alert', 'aria-labelledby': 'deadlocks-title'},
          h('div', {class: 'block-head'}, h('h2', {id: 'deadlocks-title'}, `${cycles.length} deadlock${cycles.length > 1 ? 's' : ''}`),
            h('p', {class: 'small'}, 'Answer one of the questions, or cancel one of the threads, to break each loop.')),
          h('ul', {class: 'cycles'}, cycles.map((c, i) => h('li', {'data-cycle': c.join(' '), class: 'cycle'},
            h('span', {class: 'cycle-n'}, `#${i + 1}`),
            h('span', {class: 'cycle-path'}, [...c, c[0]].map((a, j) => [j ? h('span', {class: 'arrow-word', 'aria-label': 'waits on'}, ' → ') : null, agentLink(a)])),
            h('span', {class: 'cycle-threads'}, edges.filter((e) => e.thread_id && cyc.has(`${e.from}\u0000${e.to}`) && c.includes(e.from)).map((e) => threadLink(e.thread_id)))))))
        : null,
      edges.length
        ? [h('section', {class: 'block graph-block'}, graph(nodes, edges, cycles),
          h('div', {class: 'legend', 'aria-hidden': 'true'},
            h('span', {class: 'lg lg-working'}, 'working'), h('span', {class: 'lg lg-waiting'}, 'waiting'), h('span', {class: 'lg lg-idle'}, 'idle'),
            h('span', {class: 'lg lg-gone'}, 'gone'), h('span', {class: 'lg lg-cycle'}, 'deadlock'))),
        h('section', {class: 'block'}, h('div', {class: 'block-head'}, h('h2', null, `${edges.length} wait${edges.length > 1 ? 's' : ''}`)),
          h('div', {class: 'table-wrap'}, h('table', {class: 'table cards-on-phone'},
            h('thead', null, h('tr', null, ['Agent', 'waits on', 'because', 'thread'].map((c) => h('th', {scope: 'col'}, c)))),
            h('tbody', null, edges.map((e) => h('tr', {'data-agent': e.from, 'data-thread-id': e.thread_id || null, class: cyc.has(`${e.from}\u0000${e.to}`) ? 'in-cycle' : null},
              h('td', {'data-label': 'Agent'}, agentLink(e.from), ' ', stateBadge(stateOf.get(e.from))),
              h('td', {'data-label': 'Waits on'}, agentLink(e.to)),
              h('td', {'data-label': 'Because'}, REASON[e.reason] || e.reason || ''),
              h('td', {'data-label': 'Thread'}, e.thread_id ? threadLink(e.thread_id, e.subject || shortId(e.thread_id)) : h('span', {class: 'muted'}, '—')))))))),
        ]
        : empty('Nobody waits on anybody.', 'Blocked questions, wait-reply, receive and requests draw arrows here as they happen.'),
      others.length ? h('p', {class: 'muted small'}, `${others.length} other agent${others.length > 1 ? 's' : ''} wait${others.length > 1 ? '' : 's'} on nobody.`) : null);
  },
};
