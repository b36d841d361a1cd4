import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { withSeq, type CoreEvent } from '../../src/core/events.js';
import { RunProjection, iso } from '../../src/core/view.js';
import { scenario, traces } from '../helpers/stream-golden.js';

// Plain JavaScript modules (the dashboard has no build step), loaded by path so that the type check
// does not need declarations for them.
const load = (path: string) => import(path) as Promise<Record<string, unknown>>;

describe("the dashboard's run projection", () => {
  it('is the server’s: src/dashboard/static/view.js is src/core/view.ts as generated now', async () => {
    const { generate, TARGET } = (await load('../../scripts/dashboard-view.mjs')) as { generate: () => string; TARGET: URL };
    expect(readFileSync(TARGET, 'utf8'), 'run `npm run dashboard-view`').toBe(generate());
  });

  it('has the types of the server’s: src/dashboard/static/view.d.ts is the declarations of src/core/view.ts as generated now', async () => {
    const { generateDeclarations, DECLARATIONS } = (await load('../../scripts/dashboard-view.mjs')) as {
      generateDeclarations: () => string;
      DECLARATIONS: URL;
    };
    const text = generateDeclarations();
    expect(readFileSync(DECLARATIONS, 'utf8'), 'run `npm run dashboard-view`').toBe(text);
    // Its type imports point at src/core, from the dashboard's folder.
    expect(text).toMatch(/from '\.\.\/\.\.\/core\/events\.js'/);
    expect(text).not.toMatch(/from '\.\//);
  });

  it('folds the events the API streams (time as text) into the view the server has, plus timing', async () => {
    const { RunModel } = (await load('../../src/dashboard/static/model.js')) as {
      RunModel: new () => { apply(e: unknown): void; run: unknown; calls: { index: number; timing: { attempts: unknown[] } }[] };
    };
    for (let seed = 0; seed < 40; seed++) {
      const events = traces(scenario(seed)).events;
      const server = RunProjection.of(events).view;
      const model = new RunModel();
      // As GET /v1/runs/{id}/events sends them: numbered, the time as ISO text.
      events.forEach((e: CoreEvent, i) => {
        model.apply({ ...withSeq(e, i + 1), at: iso(e.at) });
      });
      // What the dashboard adds for its timeline: `index`, `timing`, and when a review began and ended.
      const calls = model.calls.map(({ index, timing, ...c }, i) => {
        expect(index).toBe(i);
        expect(Array.isArray(timing.attempts)).toBe(true);
        const review = (c as { review?: { since?: number; decidedAt?: number } }).review;
        if (!review) return c;
        const { since, decidedAt, ...rest } = review;
        expect(typeof since).toBe('number');
        return { ...c, review: rest };
      });
      // As both would be sent: as JSON.
      expect(JSON.stringify({ ...(model.run as object), calls })).toBe(JSON.stringify(server));
    }
  });
});
