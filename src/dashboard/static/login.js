// The operator key: when the API answers 401, a dialog asks for a key (kept for the browser session)
// and the requests that were waiting go again; "Forget key" clears it.

import { onUnauthorized, session } from './api.js';
import { announce } from './util.js';

const dialog = document.getElementById('login');
let loginWaiters = [];

function updateWho() {
  document.querySelector('.who').hidden = !session.key;
}

/** Wires the dialog and the header's "Forget key" (after which `onForget()`, to load the page again). */
export function initLogin({ onForget }) {
  onUnauthorized(
    (message) =>
      new Promise((resolve) => {
        loginWaiters.push(resolve);
        dialog.querySelector('.login-why').textContent = session.key ? 'That key was not accepted.' : 'This server needs an operator key.';
        dialog.querySelector('.login-error').textContent = session.key ? message : '';
        session.clear();
        updateWho();
        if (!dialog.open) dialog.showModal();
        dialog.querySelector('#login-key').focus();
      }),
  );

  dialog.addEventListener('cancel', (ev) => ev.preventDefault());
  dialog.querySelector('form').addEventListener('submit', (ev) => {
    const input = dialog.querySelector('#login-key');
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

  document.querySelector('.forget').addEventListener('click', () => {
    session.clear();
    updateWho();
    announce('The key is forgotten');
    onForget();
  });
  updateWho();
}
