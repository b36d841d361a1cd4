// Robustness of `toolgraph replay` (DESIGN §9): truncated, wrong-version, hand-broken and unreadable
// recordings exit 2 with one message naming the file and the JSON path at fault — never a stack trace;
// a corpus with one broken file still replays the others; bad options are usage errors.
import { mkdirSync, mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { jsonErrorAt } from '../../src/replay/load.js';
import { runCli } from '../helpers/cli.js';

const ROOT = path.resolve(import.meta.dirname, '../..');
const GOOD = path.join(ROOT, 'examples/recordings/deploy-approval.json');
const GOOD_TEXT = readFileSync(GOOD, 'utf8');
const dir = mkdtempSync(path.join(tmpdir(), 'toolgraph-replay-bad-'));

async function replay(...args: string[]) {
  const r = await runCli(['replay', ...args]);
  expect(r.err).not.toMatch(/\n\s+at \S/); // never a stack trace
  return r;
}

function file(name: string, text: string): string {
  const f = path.join(dir, name);
  writeFileSync(f, text);
  return f;
}

/** The good example, parsed, changed by `edit`, saved. */
function broken(name: string, edit: (rec: Record<string, any>) => void): string {
  const rec = JSON.parse(GOOD_TEXT) as Record<string, any>;
  edit(rec);
  return file(name, JSON.stringify(rec, null, 2));
}

describe('unreadable recordings exit 2, naming the file and the JSON path', () => {
  it('a truncated file: where the JSON stops', async () => {
    const cut = GOOD_TEXT.indexOf('"endMs"', GOOD_TEXT.indexOf('"attempts"'));
    const f = file('truncated.json', GOOD_TEXT.slice(0, cut + 9));
    const r = await replay(f);
    expect(r.code).toBe(2);
    expect(r.err).toMatch(
      new RegExp(
        `^toolgraph replay: ${f.replace(/[.*+?^${}()|[\]\\/]/g, '\\$&')}: the file ends too early \\(truncated\\?\\): in attempts\\[0\\]\\.endMs at line \\d+, column \\d+`,
      ),
    );
    expect(r.out).toContain('1 recording: 0 match, 0 diverged, 1 unreadable');
  });

  it('another version of the format', async () => {
    const f = broken('v2.json', (rec) => (rec.format = 'toolgraph.recording/v2'));
    const r = await replay(f);
    expect(r.code).toBe(2);
    expect(r.err).toBe(`toolgraph replay: ${f}: format: expected "toolgraph.recording/v1", got "toolgraph.recording/v2"\n`);
  });

  it('not a recording at all', async () => {
    expect((await replay(file('list.json', '[1, 2]'))).err).toMatch(
      /list\.json: expected a recording \(a JSON object with "format": "toolgraph.recording\/v1"\), got a list\n$/,
    );
    expect((await replay(file('batch.json', '{"calls": []}'))).err).toMatch(
      /batch\.json: format: expected "toolgraph.recording\/v1", got nothing\n$/,
    );
    expect((await replay(file('empty.json', '  \n'))).err).toMatch(/empty\.json: the file is empty/);
    const garbage = await replay(file('garbage.json', '{"format": "toolgraph.recording/v1", "run": {"id": x}}'));
    expect(garbage.code).toBe(2);
    expect(garbage.err).toMatch(/garbage\.json: not valid JSON: in run\.id at line 1, column 52: Unexpected token 'x'\n$/);
  });

  it('hand-broken fields: every problem with its path, what was expected and what was found', async () => {
    const f = broken('hand-broken.json', (rec) => {
      rec.attempts[1].endMs = 'soon';
      rec.result.calls[0].status = 'done';
      rec.reviews[0].decision = 'maybe';
      rec.config.tools[0].scope = 'planet';
      rec.run.failure = 'explode';
      rec.attempts[2].extra = true;
    });
    const r = await replay(f);
    expect(r.code).toBe(2);
    expect(r.err).toContain(`toolgraph replay: ${f}: 6 problems in the recording:\n`);
    expect(r.err).toContain('  - run.failure: expected one of "fail_fast", "partial", "replan", got "explode"\n');
    expect(r.err).toContain('  - config.tools[0].scope: expected one of "run", "tenant", "global", got "planet"\n');
    expect(r.err).toContain('  - attempts[1].endMs: expected a number, got "soon"\n');
    expect(r.err).toContain('  - attempts[2].extra: unknown key\n');
    expect(r.err).toContain('  - reviews[0].decision: expected one of "approve", "reject", "edit", got "maybe"\n');
    expect(r.err).toMatch(/ {2}- result\.calls\[0\]\.status: expected one of "pending", .*, got "done"\n/);
  });

  it('inconsistent documents: unknown call ids, time running backwards, a schema that does not compile', async () => {
    const f = broken('inconsistent.json', (rec) => {
      rec.attempts[0].callId = 'ghost';
      rec.attempts[3].endMs = rec.attempts[3].startMs - 1;
      rec.attempts[2].ok = false;
      delete rec.attempts[2].output;
      rec.config.tools[1].input = { type: 'no-such-type' };
      rec.calls.push({ ...rec.calls[0] });
    });
    const r = await replay(f);
    expect(r.code).toBe(2);
    expect(r.err).toContain('- calls[5].id: expected a call id not used before in the recording, got "build"');
    expect(r.err).toContain('- attempts[0].callId: expected the id of a call of the recording, got "ghost"');
    const start = JSON.parse(GOOD_TEXT).attempts[3].startMs as number;
    expect(start).toBeGreaterThan(0);
    expect(r.err).toContain(`- attempts[3].endMs: expected a number ≥ startMs (${start}), got ${start - 1}`);
    expect(r.err).toContain('- attempts[2].error: expected the error of a failed attempt (ok is false), got nothing');
    expect(r.err).toMatch(/- config\.tools\[1\]\.input: expected a JSON Schema that compiles, got an error: /);
  });

  it('a missing file, a directory without recordings, an unreadable --config, bad options', async () => {
    const missing = await replay(path.join(dir, 'nope.json'));
    expect(missing).toMatchObject({
      code: 2,
      err: `toolgraph replay: ${path.join(dir, 'nope.json')}: cannot read it: no such file or directory\n`,
    });
    const emptyDir = path.join(dir, 'empty-dir');
    mkdirSync(emptyDir);
    expect(await replay(emptyDir)).toMatchObject({
      code: 2,
      err: `toolgraph replay: ${emptyDir}: the directory holds no *.json recordings\n`,
    });
    expect((await replay(GOOD, '--config', path.join(dir, 'none.yaml'))).err).toMatch(
      /none\.yaml: cannot read the config file: no such file/,
    );
    expect(await replay(GOOD, '--tolerance', 'soon')).toMatchObject({
      code: 2,
      err: 'toolgraph replay: --tolerance must be a number of milliseconds ≥ 0, got "soon"\n',
    });
    expect(await replay()).toMatchObject({
      code: 2,
      err: 'toolgraph replay: replay needs at least one REC.json or directory of recordings\n',
    });
    expect((await replay(GOOD, '--frobnicate')).code).toBe(2);
  });

  it('a corpus with one broken file: the rest still replays, the run exits 2, JUnit shows an error', async () => {
    const corpus = path.join(dir, 'corpus');
    mkdirSync(corpus);
    writeFileSync(path.join(corpus, 'a-good.json'), GOOD_TEXT);
    writeFileSync(path.join(corpus, 'b-broken.json'), GOOD_TEXT.slice(0, 200));
    writeFileSync(path.join(corpus, 'c-good.json'), GOOD_TEXT);
    writeFileSync(path.join(corpus, 'notes.txt'), 'not a recording');
    const xml = path.join(dir, 'corpus.xml');
    const r = await replay(corpus, '--junit', xml);
    expect(r.code).toBe(2);
    expect(r.err).toMatch(/^toolgraph replay: \S+b-broken\.json: the file ends too early \(truncated\?\): in /);
    expect(r.out).toMatch(/MATCH {4}\S+a-good\.json[\s\S]*MATCH {4}\S+c-good\.json/);
    expect(r.out).toMatch(/\S+b-broken\.json +- +- +- +- +unreadable/);
    expect(r.out).toContain('3 recordings: 2 match, 0 diverged, 1 unreadable');
    expect(readFileSync(xml, 'utf8')).toMatch(
      /<testcase classname="toolgraph.replay" name="\S+b-broken\.json" time="[\d.]+">\n {6}<error type="unreadable" message="/,
    );
  });
});

describe('jsonErrorAt', () => {
  it('finds where JSON text goes wrong and the path of the value being read there', () => {
    expect(jsonErrorAt('{"a": [1, {"b\\"c": "x}]", "d": [')).toEqual({ pos: 32, path: ['a', 1, 'd', 0] });
    expect(jsonErrorAt('{"a": 1, ')).toEqual({ pos: 9, path: [] });
    expect(jsonErrorAt('[{"k": 1}, {"k": ')).toEqual({ pos: 17, path: [1, 'k'] });
    expect(jsonErrorAt('{"a": [1,]}')).toEqual({ pos: 9, path: ['a', 1] });
    expect(jsonErrorAt('{"a": "\\q"}')).toEqual({ pos: 8, path: ['a'] });
    expect(jsonErrorAt('{"a": 1} x')).toEqual({ pos: 9, path: [] });
    expect(jsonErrorAt('{"a": [true, null, -1.5e3, "\\u00e9"]}')).toBeUndefined();
  });
});
