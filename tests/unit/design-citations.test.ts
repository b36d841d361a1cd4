/**
 * Code comments cite the design notes as `DESIGN §N` (docs/design.md, section N). Every citation in
 * src/, tests/, scripts/ and bench/ must name a section that exists there, and nothing in the repository
 * may point at a design document outside it.
 */
import { readdirSync, readFileSync, statSync } from 'node:fs';
import { join, relative, resolve } from 'node:path';
import { describe, expect, it } from 'vitest';

const ROOT = resolve(import.meta.dirname, '../..');
const CODE = /\.(ts|mts|js|mjs|css|html)$/;

function filesUnder(dir: string): string[] {
  return readdirSync(dir).flatMap((name) => {
    const path = join(dir, name);
    if (name === 'node_modules' || name === 'dist') return [];
    if (statSync(path).isDirectory()) return filesUnder(path);
    return CODE.test(name) ? [path] : [];
  });
}

/** The section numbers of docs/design.md (`## N. Title`). */
function designSections(text: string): Set<number> {
  return new Set([...text.matchAll(/^## (\d+)\. /gm)].map((m) => Number(m[1])));
}

/** Every `DESIGN §N` (and each number of `§N–§M`, `§N, §M`) a text cites, with its line. */
function citations(text: string): { section: number; line: number }[] {
  const out: { section: number; line: number }[] = [];
  text.split('\n').forEach((line, i) => {
    for (const m of line.matchAll(/DESIGN ((?:§\d+(?:\.\d+)?(?:\s*(?:[–-]|,|and)\s*)?)+)/g)) {
      const nums = [...(m[1] as string).matchAll(/§(\d+)/g)].map((n) => Number(n[1]));
      const range = /§(\d+)\s*[–-]\s*§(\d+)/.exec(m[1] as string);
      if (range) for (let n = Number(range[1]); n <= Number(range[2]); n++) nums.push(n);
      for (const section of new Set(nums)) out.push({ section, line: i + 1 });
    }
  });
  return out;
}

describe('design citations', () => {
  const sections = designSections(readFileSync(join(ROOT, 'docs/design.md'), 'utf8'));
  // The checkers themselves name what they look for.
  const checkers = ['tests/unit/design-citations.test.ts', 'tests/unit/docs.test.ts'];
  const files = ['src', 'tests', 'scripts', 'bench']
    .flatMap((d) => filesUnder(join(ROOT, d)))
    .filter((f) => !checkers.includes(relative(ROOT, f)));

  it('docs/design.md has its sections numbered from 1 without a gap', () => {
    expect(sections.size).toBeGreaterThanOrEqual(17);
    for (let n = 1; n <= sections.size; n++) expect(sections.has(n), `§${n}`).toBe(true);
  });

  it('every DESIGN §N in the code names a section of docs/design.md', () => {
    const wrong: string[] = [];
    let cited = 0;
    for (const file of files) {
      for (const c of citations(readFileSync(file, 'utf8'))) {
        cited++;
        if (!sections.has(c.section)) wrong.push(`${relative(ROOT, file)}:${c.line}: DESIGN §${c.section}`);
      }
    }
    expect(cited).toBeGreaterThan(100);
    expect(wrong).toEqual([]);
  });

  it('nothing cites a design document outside the repository', () => {
    const outside = /\.\.\/shared|shared\/DESIGN|STYLE\.md|\bSTYLE \d/;
    const wrong = files.filter((f) => outside.test(readFileSync(f, 'utf8')));
    expect(wrong.map((f) => relative(ROOT, f))).toEqual([]);
  });

  it('finds citations in their usual forms (the scanner itself)', () => {
    expect(citations('x (DESIGN §2–§4, §7) y DESIGN §12.\nDESIGN §30').map((c) => `${c.line}:${c.section}`)).toEqual([
      '1:2',
      '1:4',
      '1:7',
      '1:3',
      '1:12',
      '2:30',
    ]);
  });
});
