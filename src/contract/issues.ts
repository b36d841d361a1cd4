/** zod issues as lines a person can read: `calls[2].id: message`. */
import type { z } from 'zod';

/** `path: message` lines for a zod error, with paths like `calls[2].id` (`root` names the value itself). */
export function formatIssues(error: z.ZodError, root = 'body'): string[] {
  return error.issues.map((i) => {
    const path = i.path.reduce<string>((acc, k) => (typeof k === 'number' ? `${acc}[${k}]` : acc ? `${acc}.${String(k)}` : String(k)), '');
    return `${path || root}: ${i.message}`;
  });
}
