// The operator key: when the API answers 401, a dialog asks for a key (kept for the browser session)
// and the requests that were waiting go again; "Forget key" clears it.

import { onUnauthorized, session } from './api.js';
import { find } from './dom.js';
import { announce } from './util.js';

const dialog = find(document, '#login', HTMLDialogElement);
/** @type {(() => void)[]} */
let loginWaiters = [];

function updateWho() {
  find(document, '.who').hidden = !session.key;
}

/**
 * Wires the dialog and the header's "Forget key" (after which `onForget()`, to load the page again).
 * @param {{ onForget: () => void }} options
 */
export function initLogin({ onForget }) {
  onUnauthorized(
    (message) =>
      new Promise((resolve) => {
        loginWaiters.push(resolve);
        find(dialog, '.login-why').textContent = session.key ? 'That key was not accepted.' : 'This server needs an operator key.';
        find(dialog, '.login-error').textContent = session.key ? message : '';
        session.clear();
        updateWho();
        if (!dialog.open) dialog.showModal();
        find(dialog, '#login-key').focus();
      }),
  );

  dialog.addEventListener('cancel', (ev) => ev.preventDefault());
  find(dialog, 'form').addEventListener('submit', (ev) => {
    const input = find(dialog, '#login-key', HTMLInputElement);
    const key = input.value.trim();
    if (!key) {
      ev.preventDefault();
      return;
    }
    session.set(key);
    input.value = '';
    updateWho();
    const waiting = loginWaiters;
    loginWaiters = [];
    for (const w of waiting) w();
  });

  find(document, '.forget').addEventListener('click', () => {
    session.clear();
    updateWho();
    announce('The key is forgotten');
    onForget();
  });
  updateWho();
}
