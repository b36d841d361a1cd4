/**
 * The names a model sees (src/contract/model-names.ts): vendor-safe, injective, round-tripping, and
 * independent of the catalog's order; names the vendors take never change.
 */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { MODEL_TOOL_NAME_RE, modelNames, safeModelName, toolOfModelName } from '../../src/contract/model-names.js';

/** Tool names as catalogs have them (dots, dashes, collisions likely), and some arbitrary strings. */
const catalogName = fc.oneof(
  fc.stringMatching(/^[a-c_.-]{1,6}$/),
  fc.stringMatching(/^[A-Za-z0-9_.-]{1,64}$/),
  fc.string({ minLength: 0, maxLength: 80 }),
  fc.constantFrom('spotify.play', 'spotify_play', 'spotify_play_2', 'math.gcd', 'a'.repeat(64), `${'a'.repeat(63)}.`),
);

describe('modelNames', () => {
  it('exports dotted names with underscores, keeps the names vendors take, and maps calls back', () => {
    const names = modelNames(['spotify.play', 'math.gcd', 'read_file', 'OpenWeatherMap.get_current_weather']);
    expect(names.exported('spotify.play')).toBe('spotify_play');
    expect(names.exported('read_file')).toBe('read_file');
    expect(names.exported('OpenWeatherMap.get_current_weather')).toBe('OpenWeatherMap_get_current_weather');
    expect(names.tool('spotify_play')).toBe('spotify.play');
    expect(names.tool('read_file')).toBe('read_file');
    expect(names.tool('spotify.play')).toBeUndefined();
    expect(names.exported('unknown')).toBeUndefined();
    expect(names.renamed).toEqual([
      { name: 'OpenWeatherMap.get_current_weather', exported: 'OpenWeatherMap_get_current_weather' },
      { name: 'math.gcd', exported: 'math_gcd' },
      { name: 'spotify.play', exported: 'spotify_play' },
    ]);
    expect(toolOfModelName(names, 'math_gcd')).toBe('math.gcd');
    expect(toolOfModelName(names, 'math.gcd')).toBe('math.gcd');
    expect(toolOfModelName(undefined, 'x')).toBe('x');
  });

  it('resolves collisions with a suffix, in sorted order, never taking a name the vendors take', () => {
    const names = modelNames(['spotify_play', 'spotify-play', 'spotify.play', 'spotify:play', 'spotify_play_2']);
    // `spotify.play` sorts before `spotify:play`; both want `spotify_play`, which is a real tool's.
    expect(names.exported('spotify_play')).toBe('spotify_play');
    expect(names.exported('spotify_play_2')).toBe('spotify_play_2');
    expect(names.exported('spotify.play')).toBe('spotify_play_3');
    expect(names.exported('spotify:play')).toBe('spotify_play_4');
    expect(names.exported('spotify-play')).toBe('spotify-play');
    const long = `${'a'.repeat(64)}.x`;
    const longer = modelNames([long, 'a'.repeat(64)]);
    expect(longer.exported(long)).toBe(`${'a'.repeat(62)}_2`);
    expect(safeModelName('')).toBe('tool');
    expect(safeModelName('é.ü')).toBe('___');
  });

  it('is injective, round-trips, exports only names the vendors take, and ignores the catalog order', () => {
    fc.assert(
      fc.property(fc.array(catalogName, { maxLength: 30 }), fc.integer(), (list, seed) => {
        const names = modelNames(list);
        const unique = [...new Set(list)];
        const exported = unique.map((n) => names.exported(n) as string);
        for (const e of exported) expect(e).toMatch(MODEL_TOOL_NAME_RE);
        expect(new Set(exported).size).toBe(unique.length);
        for (const n of unique) expect(names.tool(names.exported(n) as string)).toBe(n);
        for (const n of unique) if (MODEL_TOOL_NAME_RE.test(n)) expect(names.exported(n)).toBe(n);
        // Another order of the same names: the same mapping.
        const shuffled = [...list].sort((a, b) => ((a.length * 31 + seed) % 7) - ((b.length * 31 + seed) % 7));
        const again = modelNames(shuffled);
        for (const n of unique) expect(again.exported(n)).toBe(names.exported(n));
      }),
      { numRuns: 300 },
    );
  });
});
