// Streamed runs give the same results as they always did: a hash per seeded random scenario of every
// StreamStep, the scheduler's whole event stream and a restored run's output (see
// tests/helpers/stream-golden.ts), against hashes recorded with the quadratic planner that re-planned
// the whole run on every append (tests/fixtures/stream-golden.json).
//
// Record again (only when a change of results is intended and understood):
//   STREAM_GOLDEN_RECORD=1 npx vitest run tests/unit/stream-golden
import { readFileSync, writeFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { scenario, traceHash, traces } from '../helpers/stream-golden.js';

const FIXTURE = new URL('../fixtures/stream-golden.json', import.meta.url);
const SCENARIOS = 2000;

describe('streamed runs against the golden traces', () => {
  it(`${SCENARIOS} seeded scenarios give byte-identical traces`, () => {
    const hashes = Array.from({ length: SCENARIOS }, (_, seed) => traceHash(traces(scenario(seed))));
    if (process.env.STREAM_GOLDEN_RECORD) {
      writeFileSync(FIXTURE, `${JSON.stringify({ scenarios: SCENARIOS, hashes }, null, 0)}\n`);
      return;
    }
    const golden = JSON.parse(readFileSync(FIXTURE, 'utf8')) as { scenarios: number; hashes: string[] };
    expect(golden.scenarios).toBe(SCENARIOS);
    const differ = hashes.flatMap((h, seed) => (h === golden.hashes[seed] ? [] : [seed]));
    expect(differ, `scenarios whose traces changed (seeds): ${differ.slice(0, 20).join(', ')}`).toEqual([]);
  }, 300_000);
});
