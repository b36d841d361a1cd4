/**
 * Auth (DESIGN §7): `Authorization: Bearer <key>` maps to a tenant and a role. With no keys configured
 * the server is in open development mode: every request acts as an operator, for the body's tenant.
 */
import { timingSafeEqual } from 'node:crypto';
import type { AuthKey, Role } from '../contract/config.js';
import { ApiError } from './errors.js';

export interface Principal {
  /** The key's tenant; undefined in open mode (the request names its tenant). */
  tenant?: string;
  role: Role;
  /** The most urgent run `priority` the key may submit (DESIGN §4); none: any. */
  maxPriority?: number;
}

function sameSecret(a: string, b: string): boolean {
  const x = Buffer.from(a);
  const y = Buffer.from(b);
  return x.length === y.length && timingSafeEqual(x, y);
}

export function authenticate(keys: readonly AuthKey[], header: string | undefined): Principal {
  if (keys.length === 0) return { role: 'operator' };
  const m = /^Bearer\s+(\S+)\s*$/i.exec(header ?? '');
  if (!m)
    throw new ApiError(
      'unauthorized',
      header ? 'the Authorization header must be "Bearer <key>"' : 'an Authorization: Bearer <key> header is required',
      undefined,
      { 'www-authenticate': 'Bearer' },
    );
  const found = keys.find((k) => sameSecret(k.key, m[1] as string));
  if (!found) throw new ApiError('unauthorized', 'unknown API key', undefined, { 'www-authenticate': 'Bearer' });
  return found.maxPriority !== undefined
    ? { tenant: found.tenant, role: found.role, maxPriority: found.maxPriority }
    : { tenant: found.tenant, role: found.role };
}

/** Whether the principal may see a run or review of `tenant`. Agents see only their own tenant. */
export function canSee(p: Principal, tenant: string): boolean {
  return p.role === 'operator' || p.tenant === tenant;
}

/** The tenant a new run belongs to: the key's for an agent; the body's (else the key's, else default). */
export function tenantFor(p: Principal, requested: string | undefined): string {
  if (p.role === 'agent') {
    if (requested !== undefined && requested !== p.tenant) {
      throw new ApiError('forbidden', `this key belongs to tenant ${p.tenant}; it cannot act for tenant ${requested}`);
    }
    return p.tenant as string;
  }
  return requested ?? p.tenant ?? 'default';
}

/** The run priority a submission may have (DESIGN §4): `403 priority_not_allowed` when more urgent than the key's cap. */
export function priorityFor(p: Principal, requested: number | undefined): number | undefined {
  if (requested !== undefined && p.maxPriority !== undefined && requested < p.maxPriority)
    throw new ApiError(
      'priority_not_allowed',
      `this key may submit runs of priority ${p.maxPriority} to 5 (1 is the most urgent); got priority ${requested}`,
      { maxPriority: p.maxPriority, priority: requested },
    );
  return requested;
}

export function requireOperator(p: Principal): void {
  if (p.role !== 'operator') throw new ApiError('forbidden', 'only an operator key may do this');
}

export function isLoopback(host: string): boolean {
  return host === 'localhost' || host === '::1' || host === '[::1]' || /^127\.\d+\.\d+\.\d+$/.test(host);
}
