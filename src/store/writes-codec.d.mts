/** See writes-codec.mjs. */
export type WriteParam = string | number | null;
export function encodeValue(v: unknown): string;
export function encodeWrites(writes: readonly (readonly [string, readonly unknown[]])[]): string;
export function decodeWrites(text: string): [string, WriteParam[]][];
