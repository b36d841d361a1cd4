// The run page's alerts above the graph: a cycle or deadlock (which calls wait on each other), a run
// that needs a replan (what failed, what waits, which side effects already ran), calls whose outcome
// is unknown ("Needs attention": sent, no answer, not idempotent), plan diagnostics.

import { callButton } from '../dom.js';
import { esc, plural } from '../util.js';

/**
 * The alerts of model `m`, as HTML (empty when there is nothing to say).
 * @param {import('../model.js').RunModel} m  a model with its run
 */
export function alertsHtml(m) {
  const out = [];
  const { list } = m.cycles();
  if (list.length) {
    for (const d of list) {
      out.push(`<div class="alert alert-danger cycle-alert"><p><strong><span aria-hidden="true">∞</span> ${m.run?.status === 'deadlocked' ? 'Deadlocked' : 'Cycle'}:</strong> these calls wait on each other, so none of them can ever run:</p>
        <p class="cycle-path">${d.callIds.map(callButton).join(' → ')}</p>
        <p class="muted">Their references or <code>after</code> rules form a loop. The calls that depend on them are blocked too; everything else ran. Fix the batch so that one of them goes first, and submit it again.</p></div>`);
    }
  } else if (m.run?.status === 'deadlocked') {
    const stuck = m.calls.filter((c) => c.status === 'blocked' && c.blockedBy?.code === 'dependency_blocked');
    out.push(
      `<div class="alert alert-danger"><p><strong><span aria-hidden="true">∞</span> Deadlocked:</strong> nothing could run any more. ${stuck
        .slice(0, 10)
        .map((c) => `${callButton(c.id)} ${esc(c.blockedBy?.message)}`)
        .join('; ')}</p></div>`,
    );
  }
  const unknown = outcomeUnknown(m.calls);
  if (unknown.length) {
    out.push(`<div class="alert alert-danger outcome-unknown-alert"><p><strong><span aria-hidden="true">?</span> Needs attention:</strong> ${plural(unknown.length, 'call was', 'calls were')} sent and got no answer, so whether ${unknown.length === 1 ? 'it' : 'they'} took effect is unknown: ${unknown
      .slice(0, 12)
      .map((c) => `${callButton(c.id)} <span class="muted">(${esc(c.tool)}, ${esc(causeText(c.error?.details))})</span>`)
      .join(', ')}.</p>
      <p class="muted">Their tools are not idempotent, so they were not run again. Check the tool's side before asking for them again.</p></div>`);
  }
  if (m.replanContext) {
    const rc = m.replanContext;
    out.push(`<div class="alert alert-warn"><p><strong><span aria-hidden="true">↻</span> Needs a replan:</strong> ${rc.failed.map((f) => `${callButton(f.callId)} failed (${esc(f.error?.code ?? '')})`).join(', ')}.
      ${rc.waiting.length ? `${plural(rc.waiting.length, 'call')} wait for new calls: ${rc.waiting.slice(0, 12).map(callButton).join(' ')}.` : ''}
      ${rc.sideEffects.length ? `Calls with side effects that already ran: ${rc.sideEffects.slice(0, 12).map(callButton).join(' ')}.` : ''}</p>
      <p class="muted">The agent continues with <code>POST /v1/runs/${esc(m.run?.id)}/replan</code>.</p></div>`);
  }
  const other = m.diagnostics.filter((d) => d.code !== 'cycle');
  if (other.length) {
    out.push(
      `<div class="alert alert-info"><p><strong>Plan diagnostics</strong></p><ul>${other
        .slice(0, 20)
        .map((d) => `<li>${d.callId ? `${callButton(d.callId)} ` : ''}<code>${esc(d.code)}</code>: ${esc(d.message)}</li>`)
        .join('')}</ul></div>`,
    );
  }
  return out.join('');
}

/**
 * The calls that failed `outcome_unknown` (DESIGN §4): sent, no answer; an operator must check them.
 * @template {{ id: string, tool: string, status: string, error?: { code: string, details?: unknown } | null }} C
 * @param {readonly C[]} calls
 * @returns {C[]}
 */
export function outcomeUnknown(calls) {
  return calls.filter((c) => c.status === 'failed' && c.error?.code === 'outcome_unknown');
}

/**
 * What happened to an `outcome_unknown` attempt, in words.
 * @param {unknown} details  the error's details: `{ cause }`
 */
export function causeText(details) {
  const cause = /** @type {{ cause?: unknown } | null | undefined} */ (details)?.cause;
  if (cause === 'timeout') return 'timed out';
  if (cause === 'interrupted') return 'its replica or process stopped';
  if (cause === 'tool_error') return 'connection lost';
  return 'no answer';
}
