/**
 * The `hooks:` section of the config file (DESIGN §14): services or modules that see every matching
 * call before it runs (`before_call`: allow, deny, review, new args) and after its last attempt
 * (`after_call`: replace the output, fail the call).
 *
 * ```yaml
 * hooks:
 *   - on: before_call                   # before_call | after_call
 *     match: { tool: "fs__*" }          # the policy matcher: tool glob, risk, tenant (default: every call)
 *     url: http://127.0.0.1:9100/hooks  # POST JSON; or module: ./hooks/check.js (default export, worker)
 *     headers: { Authorization: env:HOOK_KEY }
 *     timeoutMs: 2000                   # default 5000
 *     onError: deny                     # deny (default) | allow: what a hook that fails or times out decides
 * ```
 */
import path from 'node:path';
import { z } from 'zod';
import { isHttpUrl, secretText, strict, text, type SchemaCtx as Ctx } from './schema-parts.js';
import { HOOK_EVENTS, type HookMatcher } from '../core/hooks.js';

/** One hook, validated (`env:NAME` header values already read, `module` an absolute path). */
export interface HookConfig extends HookMatcher {
  /** An HTTP endpoint that takes the request as POSTed JSON… */
  url?: string;
  headers?: Record<string, string>;
  /** …or a module whose default export `async (request, { signal }) => answer` runs in a worker thread. */
  module?: string;
  timeoutMs: number;
  onError: 'deny' | 'allow';
}

export const DEFAULT_HOOK_TIMEOUT_MS = 5000;
const TOOL_GLOB_RE = /^[A-Za-z0-9_.*?-]{1,64}$/;
const HOOK_NAME_RE = /^[A-Za-z0-9_.:[\]-]{1,64}$/;

const oneOf = <const T extends readonly [string, ...string[]]>(values: T) =>
  z.enum(values, { error: `expected one of ${values.join(', ')}` });

/** The schema of `hooks:`, a list run in its order. */
export function hooksSchema(ctx: Ctx) {
  const hook = strict({
    on: oneOf(HOOK_EVENTS),
    name: z
      .string({ error: 'expected a name' })
      .regex(HOOK_NAME_RE, { error: 'expected a name of 1–64 characters [A-Za-z0-9_.:[]-]' })
      .optional(),
    match: strict({
      tool: z
        .string({ error: 'expected a tool name or glob' })
        .regex(TOOL_GLOB_RE, { error: 'expected a tool name or glob of 1–64 characters [A-Za-z0-9_.*?-]' })
        .optional(),
      risk: oneOf(['read', 'write', 'dangerous']).optional(),
      tenant: text().optional(),
    }).default({}),
    url: z
      .string({ error: 'expected an http:// or https:// URL' })
      .refine(isHttpUrl, { error: 'expected an http:// or https:// URL' })
      .optional(),
    headers: z
      .record(z.string().min(1, { error: 'expected a non-empty key' }), secretText(ctx), { error: 'expected a mapping' })
      .optional(),
    module: text()
      .transform((m) => path.resolve(ctx.baseDir, m))
      .optional(),
    timeoutMs: z
      .int({ error: 'expected an integer from 1 to 600000' })
      .min(1, { error: 'expected an integer from 1 to 600000' })
      .max(600_000, { error: 'expected an integer from 1 to 600000' })
      .default(DEFAULT_HOOK_TIMEOUT_MS),
    onError: oneOf(['deny', 'allow']).default('deny'),
  }).superRefine(
    (h, c) => {
      const v = h as Partial<Record<string, unknown>>;
      if ((v.url === undefined) === (v.module === undefined)) {
        const got = v.url === undefined ? 'neither' : 'both';
        c.addIssue({
          code: 'custom',
          input: undefined,
          message: `expected either url (an HTTP endpoint) or module (a worker module), got ${got}`,
        });
      }
      if (v.url === undefined && v.headers !== undefined)
        c.addIssue({
          code: 'custom',
          path: ['headers'],
          input: undefined,
          message: 'expected headers only with url, got them with module',
        });
    },
    { when: () => true },
  );
  return z
    .array(hook, { error: 'expected a list' })
    .default([])
    .transform((hooks): HookConfig[] =>
      hooks.map((h, i) => {
        const out: HookConfig = {
          on: h.on,
          name: h.name ?? `hooks[${i}]`,
          match: dropUndefined(h.match),
          timeoutMs: h.timeoutMs,
          onError: h.onError,
        };
        if (h.url !== undefined) out.url = h.url;
        if (h.headers !== undefined) out.headers = h.headers;
        if (h.module !== undefined) out.module = h.module;
        return out;
      }),
    )
    .superRefine((hooks, c) => {
      const seen = new Map<string, number>();
      hooks.forEach((h, i) => {
        const first = seen.get(h.name);
        if (first !== undefined)
          c.addIssue({ code: 'custom', path: [i, 'name'], input: h.name, message: `expected a name not used by hooks[${first}]` });
        else seen.set(h.name, i);
      });
    });
}

function dropUndefined<T extends object>(obj: T): T {
  return Object.fromEntries(Object.entries(obj).filter(([, v]) => v !== undefined)) as T;
}
