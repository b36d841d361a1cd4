/**
 * One append to PostgreSQL as one statement: the planned steps of a batch (batch.ts) become arrays, and
 * one `WITH … INSERT … UPDATE …` writes them all. A single statement is its own transaction, so a batch
 * costs one round trip and one commit (one fsync), and is stored whole or not at all.
 *
 * The gapless seq is checked in that same statement: the planner takes each run's first seq in the
 * batch as given, and the update of an existing run matches only where its stored `last_seq` is the
 * one just before; `toolgraph_check` (migration 0001) fails the statement when any run did not match.
 * A new run's `run.created` meets the runs' primary key, a repeated idempotency key its unique index.
 *
 * What several steps do to one run or one review inside a batch is folded here first (a statement's
 * parts see the database as it was before it), so each row is written once.
 */
import type { RunStatus } from '../core/calls.js';
import type { Step } from './batch.js';
import type { ReviewRow, RunRow } from './rows.js';

export interface AppendStatement {
  /** Stable per shape (which parts the batch needs), so that the server keeps one plan per shape. */
  name: string;
  text: string;
  values: unknown[];
  /** Runs the batch continues (not creates): how many rows the seq check must match. */
  continued: number;
}

/** A run's row as SQLite keeps it (rows.ts), without its creation order (PostgreSQL numbers it), with its last seq. */
type NewRun = Omit<RunRow, 'created_seq'> & { last_seq: number };

interface RunUpdate {
  from: number;
  to: number;
  status: RunStatus | null;
  ended_at: number | null;
  add_calls: number;
}

/**
 * Builds the statement; `firstSeqs`: each run's first seq in the batch. `owner`: the instance that
 * writes (several replicas, DESIGN §12): its new runs are its own, it may only continue runs it owns, and
 * only while its lease holds (`lease_lost` otherwise: the fence that keeps a run to one writer).
 */
export function appendStatement(steps: readonly Step[], firstSeqs: ReadonlyMap<string, number>, owner?: string): AppendStatement {
  const created = new Map<string, NewRun>();
  const updates = new Map<string, RunUpdate>();
  const tags: [string, string, string][] = [];
  const events: [string, number, string, string | null, number, string][] = [];
  const opened: ReviewRow[] = [];
  const pendingInBatch = new Map<string, ReviewRow>();
  const closes: [string, string, string, number][] = [];

  for (const step of steps) {
    switch (step.kind) {
      case 'createRun':
        created.set(step.run.id, { ...step.run, last_seq: 1 });
        for (const [k, v] of step.tags) tags.push([step.run.id, k, v]);
        break;
      case 'event': {
        const e = step.event;
        events.push([e.run_id, e.seq, e.type, e.call_id, e.at, e.data]);
        const run = created.get(e.run_id);
        if (run) run.last_seq = e.seq;
        else {
          const u = updates.get(e.run_id);
          if (u) u.to = e.seq;
          else
            updates.set(e.run_id, { from: (firstSeqs.get(e.run_id) ?? e.seq) - 1, to: e.seq, status: null, ended_at: null, add_calls: 0 });
        }
        break;
      }
      case 'setStatus': {
        const run = created.get(step.runId);
        const target = run ?? updates.get(step.runId);
        if (!target) break;
        target.status = step.status;
        target.ended_at = step.endedAt;
        if (run) run.call_count += step.addCalls;
        else (target as RunUpdate).add_calls += step.addCalls;
        break;
      }
      case 'openReview': {
        const r = { ...step.review };
        opened.push(r);
        pendingInBatch.set(`${r.run_id}\u0000${r.call_id}`, r);
        break;
      }
      case 'closeReview': {
        const key = `${step.runId}\u0000${step.callId}`;
        const r = pendingInBatch.get(key);
        if (r) {
          r.status = 'decided';
          r.decision = step.decision;
          r.decided_at = step.at;
          pendingInBatch.delete(key);
        } else closes.push([step.runId, step.callId, step.decision, step.at]);
        break;
      }
    }
  }

  const values: unknown[] = [];
  const param = (v: unknown, type: string) => {
    values.push(Array.isArray(v) ? arrayLiteral(v) : v);
    return `$${values.length}::${type}`;
  };
  const parts: string[] = [];
  let shape = owner === undefined ? '' : 'f';
  const me = owner === undefined ? undefined : param(owner, 'text');
  if (created.size > 0) {
    const rs = [...created.values()];
    shape += 'r';
    parts.push(`nr AS (INSERT INTO runs (id, tenant, status, failure, tags, created_at, ended_at, call_count, idempotency_key, last_seq${me ? ', owner' : ''})
      SELECT *${me ? `, ${me}` : ''} FROM unnest(${param(
        rs.map((r) => r.id),
        'text[]',
      )}, ${param(
        rs.map((r) => r.tenant),
        'text[]',
      )}, ${param(
        rs.map((r) => r.status),
        'text[]',
      )},
        ${param(
          rs.map((r) => r.failure),
          'text[]',
        )}, ${param(
          rs.map((r) => r.tags),
          'text[]',
        )}, ${param(
          rs.map((r) => r.created_at),
          'int8[]',
        )},
        ${param(
          rs.map((r) => r.ended_at),
          'int8[]',
        )}, ${param(
          rs.map((r) => r.call_count),
          'int4[]',
        )}, ${param(
          rs.map((r) => r.idempotency_key),
          'text[]',
        )},
        ${param(
          rs.map((r) => r.last_seq),
          'int4[]',
        )}) RETURNING 1)`);
  }
  if (tags.length > 0) {
    shape += 't';
    parts.push(`nt AS (INSERT INTO run_tags (run_id, key, value)
      SELECT * FROM unnest(${param(
        tags.map((t) => t[0]),
        'text[]',
      )}, ${param(
        tags.map((t) => t[1]),
        'text[]',
      )}, ${param(
        tags.map((t) => t[2]),
        'text[]',
      )}) RETURNING 1)`);
  }
  if (events.length > 0) {
    // Each event's data is JSON text from JSON.stringify, which never writes a raw line feed (it escapes
    // one inside a string and adds no whitespace): they go joined by line feeds, as one parameter that
    // the server splits (`string_to_array`). Not as an array: that would quote every `"` of every event
    // here and parse it all back there, for the largest parameter of an append. (Data with a line feed,
    // which no event has, would go as an array, as the other columns do.)
    const data = events.map((e) => e[5]);
    const joined = !data.some((d) => d.includes('\n'));
    shape += joined ? 'e' : 'E';
    parts.push(`ne AS (INSERT INTO events (run_id, seq, type, call_id, at, data)
      SELECT * FROM unnest(${param(
        events.map((e) => e[0]),
        'text[]',
      )}, ${param(
        events.map((e) => e[1]),
        'int4[]',
      )}, ${param(
        events.map((e) => e[2]),
        'text[]',
      )},
        ${param(
          events.map((e) => e[3]),
          'text[]',
        )}, ${param(
          events.map((e) => e[4]),
          'int8[]',
        )}, ${joined ? `string_to_array(${param(data.join('\n'), 'text')}, E'\\n')` : param(data, 'text[]')}) RETURNING 1)`);
  }
  if (updates.size > 0) {
    const ids = [...updates.keys()];
    const us = [...updates.values()];
    shape += 'u';
    // An upsert, not `UPDATE … FROM unnest(…)`: its conflict check finds each run through the primary
    // key, whatever the planner thinks of the table. The join's plan is cached once per shape, and one
    // made while `runs` was small scans the whole table for every append (O(runs) each), until the table
    // is analysed again. The new values travel in the proposed row (`excluded`): `status` '' for
    // unchanged, `created_at` the seq the stored run must be at. A run not stored would be inserted: the
    // check below fails the statement then (a row inserted has `xmax` 0; one updated, its locker's).
    parts.push(`ur AS (INSERT INTO runs AS r (id, tenant, status, failure, created_at, ended_at, call_count, last_seq)
      SELECT u.id, '', coalesce(u.status, ''), '', u.from_seq, u.ended_at, u.add_calls, u.to_seq
      FROM unnest(${param(ids, 'text[]')}, ${param(
        us.map((u) => u.from),
        'int4[]',
      )}, ${param(
        us.map((u) => u.to),
        'int4[]',
      )},
        ${param(
          us.map((u) => u.status),
          'text[]',
        )}, ${param(
          us.map((u) => u.ended_at),
          'int8[]',
        )}, ${param(
          us.map((u) => u.add_calls),
          'int4[]',
        )})
        AS u(id, from_seq, to_seq, status, ended_at, add_calls)
      ON CONFLICT (id) DO UPDATE SET last_seq = excluded.last_seq,
        status = CASE WHEN excluded.status = '' THEN r.status ELSE excluded.status END,
        ended_at = CASE WHEN excluded.status = '' THEN r.ended_at ELSE excluded.ended_at END,
        call_count = r.call_count + excluded.call_count
      WHERE r.last_seq = excluded.created_at${me ? ` AND r.owner = ${me}` : ''} RETURNING r.xmax::text <> '0' AS updated)`);
  }
  if (opened.length > 0) {
    const col = <K extends keyof ReviewRow>(k: K) => opened.map((r) => r[k]);
    shape += 'v';
    parts.push(`nv AS (INSERT INTO reviews (id, run_id, call_id, tenant, tool, args, reason, status, decision, created_at, decided_at)
      SELECT * FROM unnest(${param(col('id'), 'text[]')}, ${param(col('run_id'), 'text[]')}, ${param(col('call_id'), 'text[]')}, ${param(col('tenant'), 'text[]')},
        ${param(col('tool'), 'text[]')}, ${param(col('args'), 'text[]')}, ${param(col('reason'), 'text[]')}, ${param(col('status'), 'text[]')},
        ${param(col('decision'), 'text[]')}, ${param(col('created_at'), 'int8[]')}, ${param(col('decided_at'), 'int8[]')}) RETURNING 1)`);
  }
  if (closes.length > 0) {
    shape += 'c';
    parts.push(`cv AS (UPDATE reviews v SET status = 'decided', decision = c.decision, decided_at = c.at
      FROM unnest(${param(
        closes.map((c) => c[0]),
        'text[]',
      )}, ${param(
        closes.map((c) => c[1]),
        'text[]',
      )}, ${param(
        closes.map((c) => c[2]),
        'text[]',
      )},
        ${param(
          closes.map((c) => c[3]),
          'int8[]',
        )}) AS c(run_id, call_id, decision, at)
      WHERE v.run_id = c.run_id AND v.call_id = c.call_id AND v.status = 'pending' RETURNING 1)`);
  }
  const checks: string[] = [];
  if (me !== undefined) {
    // Replicas that follow every replica's events learn that these runs have new events (DESIGN §12),
    // sent at commit; with no follower (migration 0009), nothing is sent and no listener wakes.
    const last = new Map<string, number>();
    for (const e of events) last.set(e[0], e[1]);
    parts.push(`nn AS (SELECT pg_notify('toolgraph_events', x) FROM unnest(${param(notifyPayloads(last), 'text[]')}) AS x
      WHERE EXISTS (SELECT 1 FROM event_followers WHERE until > toolgraph_now()))`);
    checks.push(`(SELECT count(*) FROM nn) >= 0`);
    checks.push(
      `toolgraph_fence(EXISTS (SELECT 1 FROM replicas WHERE instance = ${me} AND lease_until > toolgraph_now()), 'the lease of this replica has ended')`,
    );
  }
  if (updates.size > 0)
    checks.push(
      `toolgraph_check((SELECT count(*) FILTER (WHERE updated) FROM ur) = ${param(updates.size, 'int8')}, 'a run''s seq does not go on from its stored last seq')`,
    );
  const check = checks.length > 0 ? checks.join(' AND ') : 'true';
  const text = parts.length > 0 ? `WITH ${parts.join(',\n')}\nSELECT ${check} AS ok` : 'SELECT true AS ok';
  return { name: `toolgraph_append_${shape || 'none'}`, text, values, continued: updates.size };
}

/** Strings whose array element JSON.stringify would not quote as PostgreSQL reads it back. */
// biome-ignore lint/suspicious/noControlCharactersInRegex: control characters are what it looks for
const SPECIAL = /[\u0000-\u001f\ud800-\udfff]/;

/**
 * The text form of a one-dimensional array parameter, as node-postgres would send it (each string
 * quoted, `\` and `"` escaped by a backslash, null as NULL), made without its two regular-expression
 * passes per element: for a string with no control character or surrogate, JSON.stringify quotes it
 * exactly so, natively; other strings take node-postgres's escaping. Numbers go as they print. (The
 * events' data, the largest parameter, goes joined by line feeds instead: see the `ne` part above.)
 */
export function arrayLiteral(items: readonly unknown[]): string {
  let out = '{';
  for (let i = 0; i < items.length; i++) {
    if (i > 0) out += ',';
    const v = items[i];
    if (v === null || v === undefined) out += 'NULL';
    else if (typeof v === 'number') out += String(v);
    else {
      const s = String(v);
      out += SPECIAL.test(s) ? `"${s.replace(/[\\"]/g, '\\$&')}"` : JSON.stringify(s);
    }
  }
  return `${out}}`;
}

/** At most this many bytes a NOTIFY payload (PostgreSQL's limit is 8000). */
const NOTIFY_BYTES = 7000;

/** `runId:seq` of each run, comma-separated, cut into payloads that NOTIFY takes. */
export function notifyPayloads(last: ReadonlyMap<string, number>): string[] {
  const out: string[] = [];
  let cur = '';
  for (const [runId, seq] of last) {
    const item = `${runId}:${seq}`;
    if (cur.length > 0 && Buffer.byteLength(cur) + 1 + Buffer.byteLength(item) > NOTIFY_BYTES) {
      out.push(cur);
      cur = '';
    }
    cur = cur.length > 0 ? `${cur},${item}` : item;
  }
  if (cur.length > 0) out.push(cur);
  return out;
}
