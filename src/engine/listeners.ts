/** What listeners of the engine's runs get, and how they are told. */
import type { RunEvent } from '../core/events.js';
import type { CallView, RunView } from '../core/view.js';

/** `call`: the view of the event's call, when it has one (so a listener need not search `view.calls`). */
export type RunListener = (event: RunEvent, view: RunView, call: CallView | undefined) => void;

/** Tells a listener; a listener cannot throw into the engine. */
export function tell(listener: RunListener, e: RunEvent, view: RunView, call: CallView | undefined): void {
  try {
    listener(e, view, call);
  } catch {
    // A listener cannot throw into the engine.
  }
}
