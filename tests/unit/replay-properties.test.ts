// Properties of replay over synthetic runs (src/bench/synthetic-recordings.ts: random batches with references,
// hazards, limits, retries, reviews, compensations, fail-fast, cancels and replans, run by the real
// Scheduler on the virtual clock). With no jitter in the recording, replay must reproduce it exactly —
// even at tolerance 0 — and deterministically; a changed output or a removed attempt always shows.
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { createAjv } from '../../src/config/catalog.js';
import { compareRuns } from '../../src/replay/compare.js';
import type { Recording } from '../../src/contract/recording.js';
import { replayRecording } from '../../src/replay/replay.js';
import { parseRecording } from '../../src/replay/schema.js';
import { syntheticRecording } from '../../src/bench/synthetic-recordings.js';

const ajv = createAjv();
const seed = fc.integer({ min: 1, max: 2 ** 31 - 1 });

/** The recording as it would come back from a file: JSON and validated. */
function reread(rec: Recording): Recording {
  return parseRecording(JSON.parse(JSON.stringify(rec)), 'synthetic', ajv);
}

describe('replaying synthetic recordings', () => {
  it('matches exactly, at tolerance 0, and is a valid recording document', () => {
    fc.assert(
      fc.property(seed, (s) => {
        const rec = reread(syntheticRecording(s).recording);
        const run = replayRecording(rec, { ajv, tolerance: 0 });
        expect(compareRuns(rec, run.replayed, { tolerance: 0, notes: run.notes }).divergences).toEqual([]);
        expect(run.replayed.attempts).toEqual(rec.attempts);
        expect(run.replayed.result).toEqual(rec.result);
      }),
      { numRuns: 150 },
    );
  });

  it('is deterministic: two replays give the same events', () => {
    fc.assert(
      fc.property(seed, (s) => {
        const rec = reread(syntheticRecording(s).recording);
        expect(replayRecording(rec, { ajv }).events).toEqual(replayRecording(rec, { ajv }).events);
      }),
      { numRuns: 40 },
    );
  });

  it('a changed output of a succeeded call always diverges on that call', () => {
    fc.assert(
      fc.property(seed, fc.nat(), (s, k) => {
        const rec = reread(syntheticRecording(s).recording);
        const finals = rec.attempts.filter(
          (a) => a.ok && !a.compensation && rec.result.calls.some((c) => c.id === a.callId && c.status === 'succeeded'),
        );
        fc.pre(finals.length > 0);
        const target = finals[k % finals.length] as Recording['attempts'][number];
        target.output = { changed: true };
        const run = replayRecording(rec, { ajv });
        const { divergences } = compareRuns(rec, run.replayed, { tolerance: 5, notes: run.notes });
        expect(divergences).toContainEqual(
          expect.objectContaining({ kind: 'call', callId: target.callId, fields: expect.arrayContaining(['output']) }),
        );
      }),
      { numRuns: 60 },
    );
  });

  it('a removed attempt is reported (replay wanted it, or another outcome made it needless), never a crash', () => {
    fc.assert(
      fc.property(seed, fc.nat(), (s, k) => {
        const rec = reread(syntheticRecording(s).recording);
        const own = rec.attempts.filter((a) => !a.compensation);
        fc.pre(own.length > 0);
        const gone = own[k % own.length] as Recording['attempts'][number];
        rec.attempts = rec.attempts.filter((a) => a !== gone);
        const run = replayRecording(rec, { ajv });
        const { divergences } = compareRuns(rec, run.replayed, { tolerance: 5, notes: run.notes });
        const wanted = divergences.some(
          (d) => d.kind === 'missing_attempt' && d.start.callId === gone.callId && d.start.attempt === gone.attempt,
        );
        // A zero-length attempt can be aborted (fail-fast) at the instant it starts: replay never needs
        // its outcome, and the recording's count of attempts differs instead.
        const counted = divergences.some((d) => d.kind === 'call' && d.callId === gone.callId && d.fields.includes('attempts'));
        expect(wanted || counted).toBe(true);
      }),
      { numRuns: 60 },
    );
  });
});
