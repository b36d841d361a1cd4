// The run page's "awaiting review" panel: one form per pending review of the run (approve, approve
// with edited args, reject, with an optional comment), kept in step with GET /v1/reviews.

import { api } from '../api.js';
import { el, errorText, find } from '../dom.js';
import { announce, esc, json } from '../util.js';

/**
 * A review's form (rendered below), with its controls by name.
 * @typedef {HTMLElement & { comment: HTMLInputElement, args: HTMLTextAreaElement }} ReviewForm
 */

export class ReviewsPanel {
  /**
   * `section`: the .reviews element; `runId`: the run; `onDecided(text)` after a decision went
   * through; `onShownOrHidden()` after the panel was shown or hidden.
   * @param {HTMLElement} section
   * @param {{ runId: string, onDecided: (text: string) => void, onShownOrHidden: () => void }} options
   */
  constructor(section, { runId, onDecided, onShownOrHidden }) {
    this.section = section;
    this.runId = runId;
    this.onDecided = onDecided;
    this.onShownOrHidden = onShownOrHidden;
    /** @type {import('../api.js').Review[]} */
    this.reviews = [];
    find(section, '.review-list').addEventListener('submit', (ev) => {
      ev.preventDefault();
      const submitter = /** @type {HTMLButtonElement | null} */ (ev.submitter);
      this.decide(/** @type {ReviewForm} */ (ev.target), submitter?.value ?? 'approve');
    });
  }

  destroy() {
    this.destroyed = true;
  }

  async load() {
    try {
      const res = /** @type {import('../api.js').Page<import('../api.js').Review>} */ (
        await api(`/v1/reviews?status=pending&runId=${encodeURIComponent(this.runId)}`)
      );
      if (this.destroyed) return;
      this.reviews = res.items;
      this.render();
    } catch {
      /* shown through the run's calls anyway */
    }
  }

  /**
   * @param {ReviewForm} form
   * @param {string} decision  the value of the button that sent it
   */
  async decide(form, decision) {
    const msg = find(form, '.msg');
    /** @type {{ decision: string, comment?: string, args?: unknown }} */
    const body = { decision };
    const comment = form.comment.value.trim();
    if (comment) body.comment = comment;
    if (decision === 'edit') {
      try {
        body.args = JSON.parse(form.args.value);
      } catch (e) {
        msg.textContent = `The args are not valid JSON: ${/** @type {SyntaxError} */ (e).message}`;
        form.args.focus();
        return;
      }
      if (!body.args || typeof body.args !== 'object' || Array.isArray(body.args)) {
        msg.textContent = 'The args must be a JSON object.';
        form.args.focus();
        return;
      }
    }
    for (const b of form.querySelectorAll('button')) b.disabled = true;
    msg.textContent = '';
    try {
      await api(`/v1/reviews/${encodeURIComponent(/** @type {string} */ (form.dataset.review))}`, { method: 'POST', body });
      const word = decision === 'reject' ? 'Rejected' : decision === 'edit' ? 'Approved with edited args:' : 'Approved';
      announce(`${word} ${form.dataset.call}`);
      this.onDecided(`${word} ${form.dataset.call}.`);
      this.reviews = this.reviews.filter((r) => r.id !== form.dataset.review);
      this.render();
      this.load();
    } catch (e) {
      msg.textContent = errorText(e);
      for (const b of form.querySelectorAll('button')) b.disabled = false;
    }
  }

  /** Adds a form for each new review and removes those of reviews no longer pending (typed text stays). */
  render() {
    const section = this.section;
    const list = find(section, '.review-list');
    const have = new Set(
      [.../** @type {NodeListOf<HTMLFormElement>} */ (list.querySelectorAll('form[data-review]'))].map((f) => f.dataset.review),
    );
    const want = new Set(this.reviews.map((r) => r.id));
    for (const f of /** @type {NodeListOf<HTMLFormElement>} */ (list.querySelectorAll('form[data-review]')))
      if (!want.has(/** @type {string} */ (f.dataset.review))) f.remove();
    for (const r of this.reviews) {
      if (have.has(r.id)) continue;
      const fid = `rv-${r.id.replace(/[^A-Za-z0-9_-]/g, '_')}`;
      list.append(
        el(`<form class="review" data-review="${esc(r.id)}" data-call="${esc(r.callId)}" aria-labelledby="${fid}-h">
          <h3 id="${fid}-h">Call <button type="button" class="linklike" data-open="${esc(r.callId)}"><code>${esc(r.callId)}</code></button> · <span class="muted">${esc(r.tool)}</span></h3>
          <p class="reason">${esc(r.reason)}</p>
          <label for="${fid}-args">Args (JSON; change them, then “Approve with these args”)</label>
          <textarea id="${fid}-args" name="args" rows="${Math.min(6, json(r.args).split('\n').length)}" spellcheck="false">${esc(JSON.stringify(r.args, null, 2))}</textarea>
          <label for="${fid}-comment">Comment (optional)</label>
          <input id="${fid}-comment" name="comment" autocomplete="off">
          <div class="buttons">
            <button type="submit" value="approve" class="primary">Approve</button>
            <button type="submit" value="edit">Approve with these args</button>
            <button type="submit" value="reject" class="danger">Reject</button>
          </div>
          <p class="msg" role="alert"></p>
        </form>`),
      );
    }
    section.hidden = this.reviews.length === 0;
    this.onShownOrHidden();
  }
}
