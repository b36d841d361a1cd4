// The run page's actions: cancel (after a confirmation) and download the recording. Messages go to
// the header's .action-msg.

import { api } from '../api.js';
import { errorText, find } from '../dom.js';

/**
 * Binds the buttons of the run header `head` (the .run-head element) of run `runId`.
 * @param {HTMLElement} head
 * @param {string} runId
 */
export function bindRunActions(head, runId) {
  const q = (/** @type {string} */ s) => find(head, s);
  q('.cancel').addEventListener('click', () => {
    q('.confirm').hidden = false;
    q('.cancel').hidden = true;
    q('.confirm .no').focus();
  });
  q('.confirm .no').addEventListener('click', () => {
    q('.confirm').hidden = true;
    q('.cancel').hidden = false;
    q('.cancel').focus();
  });
  q('.confirm .yes').addEventListener('click', () => cancel(head, runId));
  q('.download').addEventListener('click', () => download(head, runId));
}

/**
 * Enables cancel while the run is live; once it ended, the confirmation goes away.
 * @param {HTMLElement} head
 * @param {boolean} ended
 */
export function showRunEnded(head, ended) {
  find(head, '.cancel', HTMLButtonElement).disabled = ended;
  if (ended) find(head, '.confirm').hidden = true;
  if (ended) find(head, '.cancel').hidden = false;
}

/**
 * @param {HTMLElement} head
 * @param {string} runId
 */
async function cancel(head, runId) {
  const msg = find(head, '.action-msg');
  const yes = find(head, '.confirm .yes', HTMLButtonElement);
  yes.disabled = true;
  try {
    await api(`/v1/runs/${encodeURIComponent(runId)}/cancel`, { method: 'POST' });
    msg.textContent = 'Cancel requested: nothing new starts, running calls are aborted.';
  } catch (e) {
    msg.textContent = `Could not cancel: ${errorText(e)}`;
  } finally {
    yes.disabled = false;
    find(head, '.confirm').hidden = true;
    find(head, '.cancel').hidden = false;
  }
}

/**
 * @param {HTMLElement} head
 * @param {string} runId
 */
async function download(head, runId) {
  const msg = find(head, '.action-msg');
  try {
    const blob = /** @type {Blob} */ (await api(`/v1/runs/${encodeURIComponent(runId)}/recording`, { as: 'blob' }));
    const url = URL.createObjectURL(new Blob([blob], { type: 'application/json' }));
    const a = document.createElement('a');
    a.href = url;
    a.download = `${runId}.recording.json`;
    document.body.append(a);
    a.click();
    a.remove();
    setTimeout(() => URL.revokeObjectURL(url), 10_000);
    msg.textContent = `Downloaded ${runId}.recording.json`;
  } catch (e) {
    msg.textContent = `Could not download the recording: ${errorText(e)}`;
  }
}
