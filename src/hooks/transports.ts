/**
 * How a hook is called (DESIGN §14): `url` — the request POSTed as JSON over a kept-alive connection
 * (node:http, not fetch: on loopback a hook is mostly this round trip, and fetch's per-request cost was
 * several times it); `module` — the module's default export in a tinypool worker thread, which is
 * terminated on a timeout or an abort. Both reject with an Error that says what went wrong; the runner
 * (runner.ts) turns that into the hook's `onError` decision.
 */
import http from 'node:http';
import https from 'node:https';
import { isAbsolute, resolve } from 'node:path';
import { pathToFileURL } from 'node:url';
import Tinypool from 'tinypool';

/** The most bytes of a hook's answer that are read (an answer may carry a whole replaced output). */
export const MAX_ANSWER_BYTES = 16 * 1024 * 1024;

/** The boot file sits next to this module in src/ (tsx, vitest) and in dist/ (copied by the build). */
export const HOOK_BOOT_URL = new URL('./hook-boot.mjs', import.meta.url);

export interface HookCall {
  /** The request as JSON text. */
  body: string;
  /** The request as a value (a module gets it so). */
  request: unknown;
  timeoutMs: number;
  signal?: AbortSignal;
}

const agents = { http: new http.Agent({ keepAlive: true }), https: new https.Agent({ keepAlive: true }) };

/** An endpoint, parsed once. */
export interface HookEndpoint {
  url: URL;
  headers?: Readonly<Record<string, string>> | undefined;
}

/** POSTs the request to the endpoint; resolves with the parsed 2xx JSON answer. */
export function postHook(endpoint: HookEndpoint, call: HookCall): Promise<unknown> {
  const { url: u, headers } = endpoint;
  return new Promise((resolvePromise, reject) => {
    const secure = u.protocol === 'https:';
    let settled = false;
    const done = (err: Error | undefined, value?: unknown) => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      call.signal?.removeEventListener('abort', onAbort);
      if (err) reject(err);
      else resolvePromise(value);
    };
    const req = (secure ? https : http).request(
      {
        protocol: u.protocol,
        hostname: u.hostname.replace(/^\[|\]$/g, ''),
        port: u.port || (secure ? 443 : 80),
        path: `${u.pathname}${u.search}`,
        method: 'POST',
        agent: secure ? agents.https : agents.http,
        headers: { ...headers, 'content-type': 'application/json', 'content-length': Buffer.byteLength(call.body) },
      },
      (res) => {
        const chunks: Buffer[] = [];
        let size = 0;
        res.on('data', (chunk: Buffer) => {
          size += chunk.length;
          if (size > MAX_ANSWER_BYTES) {
            req.destroy();
            done(new Error(`the answer passes ${MAX_ANSWER_BYTES} bytes`));
          } else chunks.push(chunk);
        });
        res.on('error', (err) => done(err));
        res.on('end', () => {
          const status = res.statusCode ?? 0;
          const text = Buffer.concat(chunks).toString('utf8');
          if (status < 200 || status > 299)
            return done(new Error(`HTTP ${status} from ${u.origin}${u.pathname}${text ? `: ${text.slice(0, 200)}` : ''}`));
          if (text.trim() === '') return done(undefined, {});
          try {
            done(undefined, JSON.parse(text));
          } catch {
            done(new Error(`HTTP ${status} from ${u.origin}${u.pathname}: the answer is not JSON`));
          }
        });
      },
    );
    const timer = setTimeout(() => {
      req.destroy();
      done(new Error(`timed out after ${call.timeoutMs} ms`));
    }, call.timeoutMs);
    const onAbort = () => {
      req.destroy();
      done(new Error('aborted'));
    };
    if (call.signal?.aborted) return onAbort();
    call.signal?.addEventListener('abort', onAbort, { once: true });
    req.on('error', (err) => done(new Error(`request to ${u.origin}${u.pathname} failed: ${err.message}`)));
    req.end(call.body);
  });
}

type BootResult = { ok: true; answer: unknown } | { ok: false; message: string };

/** Runs hook modules in worker threads: one lazily made pool for every module hook. */
export class ModuleHooks {
  private pool: Tinypool | undefined;

  constructor(private readonly maxThreads: number) {}

  async call(module: string, call: HookCall): Promise<unknown> {
    const moduleUrl = module.startsWith('file:') ? module : pathToFileURL(isAbsolute(module) ? module : resolve(module)).href;
    this.pool ??= new Tinypool({ filename: HOOK_BOOT_URL.href, maxThreads: this.maxThreads, minThreads: 0, idleTimeout: 30_000 });
    const timeout = AbortSignal.timeout(call.timeoutMs);
    const signal = call.signal ? AbortSignal.any([call.signal, timeout]) : timeout;
    try {
      const r = (await this.pool.run({ moduleUrl, request: call.request }, { signal })) as BootResult;
      if (!r.ok) throw new Error(r.message);
      return r.answer;
    } catch (err) {
      if (timeout.aborted) throw new Error(`timed out after ${call.timeoutMs} ms`);
      if (call.signal?.aborted) throw new Error('aborted');
      throw err;
    }
  }

  async close(): Promise<void> {
    const p = this.pool;
    this.pool = undefined;
    if (p) await p.destroy();
  }
}
