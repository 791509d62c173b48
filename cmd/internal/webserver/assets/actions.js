// actions.js: the only two things the page changes in the store: an answer
// to a blocked question (reply --kind answer) and a thread's cancel.

import * as api from './api.js';
import {h} from './dom.js';

// answerForm lets a person answer a thread's question; the worker waiting
// in wait-reply wakes when it lands.
export function answerForm(threadId, ctx, opts = {}) {
  const key = `answer-${threadId}`;
  const err = h('p', {class: 'form-error', role: 'alert', hidden: true});
  const from = h('input', {name: 'from', id: `${key}-from`, 'data-keep': `${key}-from`, value: ctx.as(), autocomplete: 'off', required: true, spellcheck: 'false'});
  const summary = h('input', {name: 'summary', id: `${key}-summary`, 'data-keep': `${key}-summary`, autocomplete: 'off', placeholder: opts.placeholder || 'Your answer, in one line'});
  const body = h('textarea', {name: 'body', id: `${key}-body`, 'data-keep': `${key}-body`, rows: '3', placeholder: 'Details (optional)'});
  const button = h('button', {type: 'submit', class: 'btn btn-primary', 'data-action': 'answer'}, 'Send answer');
  const form = h('form', {class: 'answer-form', 'data-thread-id': threadId, 'aria-label': `Answer thread ${threadId}`},
    h('div', {class: 'field field-from'}, h('label', {for: from.id}, 'Answer as'), from),
    h('div', {class: 'field field-summary'}, h('label', {for: summary.id}, 'Answer'), summary),
    h('div', {class: 'field field-body'}, h('label', {for: body.id}, 'Details'), body),
    h('div', {class: 'form-actions'}, button, opts.extra || null),
    err);
  form.addEventListener('submit', async (e) => {
    e.preventDefault();
    err.hidden = true;
    const who = from.value.trim();
    if (!summary.value.trim() && !body.value.trim()) {
      err.textContent = 'Write an answer first.';
      err.hidden = false;
      summary.focus();
      return;
    }
    button.disabled = true;
    button.textContent = 'Sending…';
    try {
      const res = await api.post(api.threadPath(threadId, '/answer'), {from: who, summary: summary.value.trim(), body: body.value});
      ctx.setAs(who);
      summary.value = '';
      body.value = '';
      ctx.toast(`Answer sent${res.message && res.message.message_id ? ' (' + res.message.message_id + ')' : ''}: the waiting worker wakes.`, 'ok');
      ctx.refreshNow();
    } catch (x) {
      err.textContent = x.message || String(x);
      err.hidden = false;
    } finally {
      button.disabled = false;
      button.textContent = 'Send answer';
    }
  });
  return form;
}

// cancelButton asks for confirmation, then cancels the thread as the page's identity.
export function cancelButton(threadId, ctx, subject) {
  const b = h('button', {type: 'button', class: 'btn btn-danger-quiet', 'data-action': 'cancel', 'data-thread-id': threadId}, 'Cancel thread…');
  b.addEventListener('click', () => confirmCancel(threadId, ctx, subject));
  return b;
}

function confirmCancel(threadId, ctx, subject) {
  const dlg = document.getElementById('confirm');
  const agent = document.getElementById('confirm-agent');
  const reason = document.getElementById('confirm-reason');
  document.getElementById('confirm-text').textContent = `“${subject || threadId}” (${threadId}) stops for good: its holder loses the lease and the thread ends as cancelled.`;
  agent.value = ctx.as();
  reason.value = '';
  dlg.returnValue = '';
  dlg.addEventListener('close', async function onClose() {
    dlg.removeEventListener('close', onClose);
    if (dlg.returnValue !== 'cancel') return;
    const who = agent.value.trim();
    try {
      await api.post(api.threadPath(threadId, '/cancel'), {agent: who, reason: reason.value.trim()});
      ctx.setAs(who);
      ctx.toast(`Thread ${threadId} cancelled.`, 'ok');
      ctx.refreshNow();
    } catch (x) {
      ctx.toast(`Cancel refused: ${x.message || x}`, 'error');
    }
  });
  dlg.showModal();
  reason.focus();
}
