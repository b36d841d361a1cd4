// The run page's actions: cancel (after a confirmation) and download the recording. Messages go to
// the header's .action-msg.

import { api } from '../api.js';
import { errorText } from '../dom.js';

/** Binds the buttons of the run header `head` (the .run-head element) of run `runId`. */
export function bindRunActions(head, runId) {
  const q = (s) => head.querySelector(s);
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

/** Enables cancel while the run is live; once it ended, the confirmation goes away. */
export function showRunEnded(head, ended) {
  head.querySelector('.cancel').disabled = ended;
  if (ended) head.querySelector('.confirm').hidden = true;
  if (ended) head.querySelector('.cancel').hidden = false;
}

async function cancel(head, runId) {
  const msg = head.querySelector('.action-msg');
  const yes = head.querySelector('.confirm .yes');
  yes.disabled = true;
  try {
    await api(`/v1/runs/${encodeURIComponent(runId)}/cancel`, { method: 'POST' });
    msg.textContent = 'Cancel requested: nothing new starts, running calls are aborted.';
  } catch (e) {
    msg.textContent = `Could not cancel: ${errorText(e)}`;
  } finally {
    yes.disabled = false;
    head.querySelector('.confirm').hidden = true;
    head.querySelector('.cancel').hidden = false;
  }
}

async function download(head, runId) {
  const msg = head.querySelector('.action-msg');
  try {
    const blob = await api(`/v1/runs/${encodeURIComponent(runId)}/recording`, { as: 'blob' });
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
