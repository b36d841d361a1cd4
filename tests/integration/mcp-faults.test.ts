/**
 * MCP faults on the tests' own stdio server (DESIGN §4 caps, §13): an answer of 12 MB, past the SDK's
 * 10 MiB read buffer and the tool's `maxOutputBytes`, fails its call `output_too_large` and nothing
 * else: another call in flight on the same server succeeds, and the next call is answered by the same
 * process (no restart). A burst of `tools/list_changed` is refreshed and logged once per burst.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startToolgraph, TEST_SERVER, type Toolgraph } from '../helpers/mcp.js';

const node = JSON.stringify(process.execPath);

describe('MCP faults', () => {
  let tg: Toolgraph;
  beforeAll(async () => {
    tg = await startToolgraph(`
mcp:
  servers:
    - name: t
      command: ${node}
      args: [${JSON.stringify(TEST_SERVER)}]
      env: { CHURN: "1" }
      trustAnnotations: true
      include: ["*"]
`);
  });
  afterAll(async () => {
    await tg?.close();
  });

  const pidOf = async () => {
    const view = await tg.run([{ id: 'p', tool: 't__pid', args: {} }]);
    expect(view.status).toBe('succeeded');
    return (view.calls[0]?.output as { pid: number } | undefined)?.pid;
  };

  it('an answer of 12 MB fails its call output_too_large; a call in flight beside it succeeds; the same process answers next', async () => {
    const pid = await pidOf();
    const view = await tg.run([
      { id: 'slow', tool: 't__slow', args: { ms: 1500 } },
      { id: 'big', tool: 't__big', args: { n: 12_000_000 } },
    ]);
    const [slow, big] = view.calls;
    expect(big).toMatchObject({ status: 'failed', error: { code: 'output_too_large' } });
    expect(big?.attempts).toBe(1);
    expect(slow).toMatchObject({ status: 'succeeded', output: { content: [{ type: 'text', text: 'slept 1500' }] } });
    // No restart: the same process answers, and the connection never dropped.
    expect(await pidOf()).toBe(pid);
    expect(
      tg.logger.lines.filter((l) => /connection|closed|dropped during/.test(l) && !/passed its tools' maxOutputBytes/.test(l)),
    ).toEqual([]);
    expect(tg.logger.lines.filter((l) => /an answer of \d+ bytes passed its tools' maxOutputBytes: dropped/.test(l))).toHaveLength(1);
  }, 60_000);

  it('an answer under the frame bound but over maxOutputBytes is output_too_large by the engine, as before', async () => {
    const view = await tg.run([{ id: 'big', tool: 't__big', args: { n: 5_000_000 } }]);
    expect(view.calls[0]).toMatchObject({ status: 'failed', error: { code: 'output_too_large', details: { maxBytes: 4 * 1024 * 1024 } } });
  }, 60_000);

  it('a burst of tools/list_changed (40 in 200 ms) is refreshed and logged once or twice, not 40 times', async () => {
    const before = tg.logger.lines.length;
    const view = await tg.run([{ id: 'c', tool: 't__churn', args: { n: 40 } }]);
    expect(view.status).toBe('succeeded');
    // The burst's refreshes settle (the last one after the burst's quiet period).
    const deadline = Date.now() + 5000;
    let refreshed: string[] = [];
    while (Date.now() < deadline) {
      refreshed = tg.logger.lines.slice(before).filter((l) => /tool list refreshed/.test(l));
      if (refreshed.length > 0) break;
      await new Promise((r) => setTimeout(r, 20));
    }
    await new Promise((r) => setTimeout(r, 600));
    refreshed = tg.logger.lines.slice(before).filter((l) => /tool list refreshed/.test(l));
    expect(refreshed.length).toBeGreaterThanOrEqual(1);
    expect(refreshed.length).toBeLessThanOrEqual(2);
    expect(refreshed.at(-1)).toMatch(/40 notifications/);
  }, 30_000);
});
