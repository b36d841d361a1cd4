import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { type CommandAnswer, Commands } from '../../src/cluster/commands.js';
import type { Notifications } from '../../src/cluster/notifications.js';
import type { CommandsSql } from '../../src/store/postgres/commands.js';

interface Row {
  id: number;
  runId: string;
  target: string;
  body: string;
  status: 'pending' | 'running' | 'done';
  result: string | null;
}

/** An in-memory `commands` table with the rules of store/postgres/commands.ts; runs' owners in `owners`. */
function fakeSql(owners: Map<string, string>) {
  const rows: Row[] = [];
  const sql: CommandsSql = {
    async send(runId, body) {
      if (!owners.has(runId)) return undefined;
      const id = rows.length + 1;
      rows.push({ id, runId, target: owners.get(runId) ?? '', body, status: 'pending', result: null });
      return id;
    },
    async answer(id) {
      const r = rows[id - 1];
      return r?.status === 'done' && r.result !== null && r.result !== 'null' ? r.result : undefined;
    },
    async withdraw(id) {
      const r = rows[id - 1];
      if (r?.status !== 'pending') return false;
      r.status = 'done';
      r.result = 'null';
      return true;
    },
    async followOwner(id) {
      const r = rows[id - 1];
      const owner = r && owners.get(r.runId);
      if (r?.status === 'pending' && owner && owner !== r.target) r.target = owner;
    },
    async retarget(runIds, instance) {
      for (const r of rows) if (runIds.includes(r.runId) && r.status !== 'done') Object.assign(r, { target: instance, status: 'pending' });
    },
    async pending(instance, limit) {
      return rows.filter((r) => r.target === instance && r.status === 'pending').slice(0, limit);
    },
    async take(id, instance) {
      const r = rows[id - 1];
      if (r?.status !== 'pending' || r.target !== instance) return false;
      r.status = 'running';
      return true;
    },
    async finish(id, instance, answer) {
      const r = rows[id - 1];
      if (r && r.target === instance) Object.assign(r, { status: 'done', result: answer });
    },
  };
  return { sql, rows };
}

const quiet = { on: () => () => {} } as unknown as Notifications;

describe('Commands (cluster/commands.ts) over a fake CommandsSql', () => {
  beforeEach(() => {
    vi.useFakeTimers({ toFake: ['setTimeout', 'clearTimeout', 'Date'] });
  });
  afterEach(() => {
    vi.useRealTimers();
  });

  it('the owner applies each command once, oldest first, and the sender gets its answer', async () => {
    const owners = new Map([['run-1', 'b/1']]);
    const db = fakeSql(owners);
    const applied: unknown[] = [];
    const owner = new Commands(db.sql, () => 'b/1', quiet, 7000);
    const sender = new Commands(db.sql, () => 'a/1', quiet, 7000);
    const answers = [sender.send('run-1', { n: 1 }), sender.send('run-1', { n: 2 })];
    owner.start(async (body) => {
      applied.push(body);
      return { ok: true, value: body };
    });
    await vi.advanceTimersByTimeAsync(1000);
    const got: CommandAnswer[] = await Promise.all(answers);
    expect(applied).toEqual([{ n: 1 }, { n: 2 }]);
    expect(got).toEqual([
      { ok: true, value: { n: 1 } },
      { ok: true, value: { n: 2 } },
    ]);
    await vi.advanceTimersByTimeAsync(5000);
    expect(applied).toHaveLength(2);
    owner.stop();
  });

  it('a command nobody takes in time is withdrawn (owner_unavailable) and never applied after', async () => {
    const owners = new Map([['run-1', 'dead/1']]);
    const db = fakeSql(owners);
    const sender = new Commands(db.sql, () => 'a/1', quiet, 3000);
    const answer = sender.send('run-1', { cancel: true });
    await vi.advanceTimersByTimeAsync(4000);
    expect(await answer).toMatchObject({ ok: false, code: 'owner_unavailable' });
    // The run is taken over now: the withdrawn command does not follow it.
    const applied: unknown[] = [];
    const next = new Commands(db.sql, () => 'c/1', quiet, 3000);
    await next.retarget(['run-1']);
    next.start(async (body) => {
      applied.push(body);
      return { ok: true, value: null };
    });
    await vi.advanceTimersByTimeAsync(2000);
    expect(applied).toEqual([]);
    next.stop();
  });

  it('a command of a run taken over follows it to the new owner, which applies it once; an unknown run is not_found', async () => {
    const owners = new Map([['run-1', 'dead/1']]);
    const db = fakeSql(owners);
    const sender = new Commands(db.sql, () => 'a/1', quiet, 7000);
    const answer = sender.send('run-1', { n: 1 });
    await vi.advanceTimersByTimeAsync(600);
    owners.set('run-1', 'c/1');
    const applied: unknown[] = [];
    const next = new Commands(db.sql, () => 'c/1', quiet, 7000);
    next.start(async (body) => {
      applied.push(body);
      return { ok: false, code: 'conflict', message: 'ended' };
    });
    await vi.advanceTimersByTimeAsync(3000);
    expect(await answer).toEqual({ ok: false, code: 'conflict', message: 'ended' });
    expect(applied).toEqual([{ n: 1 }]);
    expect(await sender.send('run-9', {})).toMatchObject({ ok: false, code: 'not_found' });
    next.stop();
  });
});
