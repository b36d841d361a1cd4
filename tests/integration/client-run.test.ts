/**
 * `client.run(batch, { handlers })` against a real server (DESIGN §17): the agent's functions run as
 * their calls start, in toolgraph's order (a read of a file after the write of it, a read of another
 * file beside the write), their outputs come back under the right call ids; a thrown error is the
 * call's error (retried when it says retryable); a missing handler fails its call with a clear error;
 * the handler's signal aborts on timeout and on cancel.
 */
import { afterEach, describe, expect, it } from 'vitest';
import { ToolgraphClient, type ToolHandler } from '../../src/client/index.js';
import { closeAll, startApi } from '../helpers/server.js';

afterEach(closeAll);

const YAML = `
tools:
  - name: write_file
    reads: []
    writes: ["file:{path}"]
    executor: { kind: client }
  - name: read_file
    reads: ["file:{path}"]
    writes: []
    risk: read
    idempotent: true
    executor: { kind: client }
  - name: flaky
    reads: []
    writes: []
    idempotent: true
    retry: { attempts: 3, backoffMs: 5, maxBackoffMs: 5 }
    executor: { kind: client }
  - name: slow
    reads: []
    writes: []
    timeoutMs: 300
    executor: { kind: client }
  - name: unhandled
    reads: []
    writes: []
    executor: { kind: client }
defaults: { timeoutMs: 20000 }
`;

/** A promise with its resolve. */
function gate(): { promise: Promise<void>; open: () => void } {
  let open = () => {};
  const promise = new Promise<void>((r) => (open = r));
  return { promise, open };
}

describe('client.run', () => {
  it('runs the handlers in toolgraph’s order and returns every result under its call id', async () => {
    const api = await startApi({ yaml: YAML });
    const tg = new ToolgraphClient({ baseUrl: api.url });
    const files = new Map<string, string>([['/y', 'why']]);
    const log: string[] = [];
    const writing = gate();
    const readY = gate();
    const handlers: Record<string, ToolHandler> = {
      write_file: async (args, ctx) => {
        log.push(`start ${ctx.callId}`);
        // The read of /y runs beside the write: the write ends only once it has.
        await readY.promise;
        files.set(args.path as string, args.content as string);
        log.push(`end ${ctx.callId}`);
        writing.open();
        return { bytes: (args.content as string).length };
      },
      read_file: async (args, ctx) => {
        log.push(`start ${ctx.callId}`);
        const content = files.get(args.path as string) ?? null;
        log.push(`end ${ctx.callId}`);
        if (args.path === '/y') readY.open();
        return { content };
      },
      not_in_the_batch: () => {
        throw new Error('never called');
      },
    };
    const run = await tg.run(
      {
        calls: [
          { id: 'w', tool: 'write_file', args: { path: '/x', content: 'hello' } },
          { id: 'rx', tool: 'read_file', args: { path: '/x' } },
          { id: 'ry', tool: 'read_file', args: { path: '/y' } },
        ],
      },
      { handlers },
    );
    expect(run.status).toBe('succeeded');
    expect(run.calls.map((c) => [c.id, c.output])).toEqual([
      ['w', { bytes: 5 }],
      ['rx', { content: 'hello' }],
      ['ry', { content: 'why' }],
    ]);
    // ry ran while w was running; rx only after w ended.
    expect(log.indexOf('end ry')).toBeLessThan(log.indexOf('end w'));
    expect(log.indexOf('start rx')).toBeGreaterThan(log.indexOf('end w'));
  });

  it('a thrown error is the call’s error, retried only when it says retryable; a tool without a handler fails naming it', async () => {
    const api = await startApi({ yaml: YAML });
    const tg = new ToolgraphClient({ baseUrl: api.url });
    const attempts: number[] = [];
    const run = await tg.run(
      {
        calls: [
          { id: 'f', tool: 'flaky', args: {} },
          { id: 'u', tool: 'unhandled', args: {} },
          { id: 'w', tool: 'write_file', args: { path: '/z' } },
        ],
      },
      {
        handlers: {
          flaky: (_args, ctx) => {
            attempts.push(ctx.attempt);
            if (ctx.attempt < 2) throw Object.assign(new Error('busy'), { retryable: true });
            return 'ok';
          },
          write_file: () => {
            throw new Error('disk full');
          },
        },
      },
    );
    expect(attempts).toEqual([1, 2]);
    expect(run.calls.map((c) => [c.id, c.status, c.output, c.error?.code, c.error?.message])).toEqual([
      ['f', 'succeeded', 'ok', undefined, undefined],
      ['u', 'failed', null, 'tool_error', expect.stringContaining('no handler for tool unhandled')],
      ['w', 'failed', null, 'tool_error', 'disk full'],
    ]);
  });

  it('an output that cannot be posted, and an overlong error message, still end the call at once', async () => {
    const api = await startApi({ yaml: YAML });
    const tg = new ToolgraphClient({ baseUrl: api.url });
    let signal: AbortSignal | undefined;
    const run = await tg.run(
      {
        calls: [
          { id: 'big', tool: 'write_file', args: { path: '/a' } },
          { id: 'long', tool: 'read_file', args: { path: '/b' } },
          { id: 'fine', tool: 'flaky', args: {} },
        ],
      },
      {
        handlers: {
          write_file: () => 10n,
          read_file: () => {
            throw new Error('x'.repeat(20_000));
          },
          flaky: (_args, ctx) => {
            signal = ctx.signal;
            return 'ok';
          },
        },
      },
    );
    expect(run.calls.map((c) => [c.id, c.status, c.error?.code])).toEqual([
      ['big', 'failed', 'tool_error'],
      ['long', 'failed', 'tool_error'],
      ['fine', 'succeeded', undefined],
    ]);
    expect(run.calls[0]?.error?.message).toContain('the output of write_file could not be posted');
    expect(run.calls[1]?.error?.message.length).toBe(10_000);
    // Its own answer ended the attempt: the handler's signal never fired.
    expect(signal?.aborted).toBe(false);
  });

  it('the handler’s signal aborts on timeout and on cancel', async () => {
    const api = await startApi({ yaml: YAML });
    const tg = new ToolgraphClient({ baseUrl: api.url });
    const aborted: string[] = [];
    let started = gate();
    const waitForAbort: ToolHandler = (_args, ctx) =>
      new Promise((_resolve, reject) => {
        started.open();
        ctx.signal.addEventListener('abort', () => {
          aborted.push(ctx.callId);
          reject(ctx.signal.reason);
        });
      });
    const timedOut = await tg.run({ calls: [{ id: 's', tool: 'slow', args: {} }] }, { handlers: { slow: waitForAbort } });
    // Not idempotent: whether the agent acted is unknown (DESIGN §4), its cause the timeout.
    expect(timedOut.calls[0]).toMatchObject({ status: 'failed', error: { code: 'outcome_unknown', details: { cause: 'timeout' } } });
    expect(aborted).toEqual(['s']);

    const controller = new AbortController();
    started = gate();
    void started.promise.then(() => controller.abort());
    const cancelled = await tg.run(
      { calls: [{ id: 'w', tool: 'write_file', args: { path: '/c' } }] },
      { handlers: { write_file: waitForAbort }, signal: controller.signal },
    );
    expect(cancelled.status).toBe('cancelled');
    expect(cancelled.calls[0]?.status).toBe('cancelled');
    expect(aborted).toEqual(['s', 'w']);
  });

  it('client.open: calls added one by one start as soon as they are safe, each handler as its call starts', async () => {
    const api = await startApi({ yaml: YAML });
    const tg = new ToolgraphClient({ baseUrl: api.url });
    const files = new Map<string, string>();
    const log: string[] = [];
    const writeStarted = gate();
    const finishWrite = gate();
    const run = await tg.open(
      {},
      {
        handlers: {
          write_file: async (args, ctx) => {
            log.push(`start ${ctx.callId}`);
            writeStarted.open();
            await finishWrite.promise;
            files.set(args.path as string, args.content as string);
            log.push(`end ${ctx.callId}`);
            return 'written';
          },
          read_file: (args, ctx) => {
            log.push(`read ${ctx.callId}`);
            return files.get(args.path as string) ?? null;
          },
        },
      },
    );
    await run.add({ id: 'w', tool: 'write_file', args: { path: '/x', content: 'streamed' } });
    // The write runs before the rest of the step has even arrived.
    await writeStarted.promise;
    await run.add({ id: 'rx', tool: 'read_file', args: { path: '/x' } }, { id: 'ry', tool: 'read_file', args: { path: '/y' } });
    await run.seal();
    await until(() => log.includes('read ry'));
    expect(log).toEqual(['start w', 'read ry']);
    finishWrite.open();
    const ended = await run.done();
    expect(ended.status).toBe('succeeded');
    expect(ended.calls.map((c) => [c.id, c.output])).toEqual([
      ['w', 'written'],
      ['rx', 'streamed'],
      ['ry', null],
    ]);
    expect(log).toEqual(['start w', 'read ry', 'end w', 'read rx']);
  });
});

async function until(holds: () => boolean): Promise<void> {
  const deadline = Date.now() + 10_000;
  while (!holds()) {
    if (Date.now() > deadline) throw new Error('timed out');
    await new Promise((r) => setTimeout(r, 10));
  }
}
