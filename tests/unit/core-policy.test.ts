// Policy (DESIGN §5): globs, rule matching, after/requires edges, deny, review.
import { describe, expect, it } from 'vitest';
import type { Edge } from '../../src/core/calls.js';
import { buildPlan } from '../../src/core/plan.js';
import { globMatch, policyFor } from '../../src/core/policy.js';
import type { Policy, ToolManifest } from '../../src/core/tool.js';
import { catalogOf, tool } from '../helpers/catalog.js';

describe('globMatch', () => {
  it.each([
    ['deploy_*', 'deploy_web', true],
    ['deploy_*', 'deploy_', true],
    ['deploy_*', 'redeploy_web', false],
    ['*', 'anything.at.all', true],
    ['*', '', true],
    ['a?c', 'abc', true],
    ['a?c', 'ac', false],
    ['a?c', 'abbc', false],
    ['a.b', 'a.b', true],
    ['a.b', 'aXb', false],
    ['fs.*', 'fs.read', true],
    ['fs.*', 'fsXread', false],
    ['(x)+', '(x)+', true],
    ['(x)+', 'xx', false],
    ['$x^', '$x^', true],
    ['*_file', 'read_file', true],
    ['*_file', 'read_files', false],
    ['tenant-[a]', 'tenant-[a]', true],
    ['tenant-[a]', 'tenant-a', false],
  ])('%s ~ %s → %s', (glob, value, expected) => {
    expect(globMatch(glob, value)).toBe(expected);
  });
});

describe('policyFor', () => {
  const deploy = tool('deploy_web', { after: ['build'], requires: ['service_exists'] });
  const rm = tool('rm_rf', { risk: 'dangerous' });

  it('unions after/requires from the tool and every matching rule, naming their source', () => {
    const policy: Policy = {
      rules: [
        { match: { tool: 'deploy_*' }, after: ['approve_*', 'run_tests'] },
        { match: { tool: 'other' }, after: ['never'] },
        { match: { risk: 'write', tenant: 'ac*' }, requires: ['lock'] },
        { match: {}, after: ['audit'] },
      ],
    };
    expect(policyFor(deploy, 'acme', policy)).toEqual({
      after: [
        { pattern: 'build', source: 'tool deploy_web' },
        { pattern: 'approve_*', source: 'policy rule 1 (tool deploy_*)' },
        { pattern: 'run_tests', source: 'policy rule 1 (tool deploy_*)' },
        { pattern: 'audit', source: 'policy rule 4' },
      ],
      requires: [
        { pattern: 'service_exists', source: 'tool deploy_web' },
        { pattern: 'lock', source: 'policy rule 3 (risk write, tenant ac*)' },
      ],
    });
    expect(policyFor(deploy, 'other', policy).requires).toEqual([{ pattern: 'service_exists', source: 'tool deploy_web' }]);
  });

  it.each<[string, ToolManifest, Policy, { deny?: string; review?: string }]>([
    ['nothing matches', deploy, { rules: [{ match: { tool: 'x' }, deny: 'no' }] }, {}],
    ['a deny', deploy, { rules: [{ match: { tool: 'deploy_*' }, deny: 'frozen' }] }, { deny: 'frozen' }],
    [
      'the first deny wins',
      deploy,
      {
        rules: [
          { match: {}, deny: 'one' },
          { match: {}, deny: 'two' },
        ],
      },
      { deny: 'one' },
    ],
    [
      'allow does not bypass deny (allow first)',
      deploy,
      {
        rules: [
          { match: {}, allow: true },
          { match: {}, deny: 'no' },
        ],
      },
      { deny: 'no' },
    ],
    [
      'allow does not bypass deny (allow last)',
      deploy,
      {
        rules: [
          { match: {}, deny: 'no' },
          { match: {}, allow: true },
        ],
      },
      { deny: 'no' },
    ],
    ['dangerous tools are reviewed by default', rm, { rules: [] }, { review: 'rm_rf is dangerous' }],
    ['review: false waives it', rm, { rules: [{ match: { tool: 'rm_*' }, review: false }] }, {}],
    ['allow waives it', rm, { rules: [{ match: { risk: 'dangerous' }, allow: true }] }, {}],
    [
      'review: true asks for it',
      deploy,
      { rules: [{ match: { tool: 'deploy_web' }, review: true }] },
      { review: 'policy rule 1 (tool deploy_web) asks for review' },
    ],
    [
      'review: true beats a waiver',
      rm,
      {
        rules: [
          { match: {}, review: false },
          { match: { risk: 'dangerous' }, review: true },
        ],
      },
      { review: 'policy rule 2 (risk dangerous) asks for review' },
    ],
    [
      'a tenant glob that does not match',
      rm,
      { rules: [{ match: { tenant: 'trial*' }, review: false }] },
      { review: 'rm_rf is dangerous' },
    ],
    ['a risk that does not match', deploy, { rules: [{ match: { risk: 'read' }, deny: 'ro' }] }, {}],
  ])('%s', (_label, manifest, policy, expected) => {
    const cp = policyFor(manifest, 'acme', policy);
    expect({ deny: cp.deny, review: cp.review }).toEqual({ deny: expected.deny, review: expected.review });
  });
});

describe('policy in buildPlan', () => {
  const pure = { reads: [], writes: [] };
  const catalog = catalogOf([
    tool('run_tests', pure),
    tool('approve_release', pure),
    tool('build', pure),
    tool('deploy_web', { ...pure, after: ['run_tests'] }),
    tool('deploy_db', { ...pure, requires: ['service_exists'] }),
    tool('service_exists', pure),
    tool('backup', pure),
    tool('rm_rf', { ...pure, risk: 'dangerous' }),
    tool('rm_tmp', { ...pure, risk: 'write' }),
    tool('chmod', { ...pure, risk: 'dangerous' }),
  ]);
  type C = { id: string; tool: string; args?: Record<string, unknown> };
  const plan = (calls: C[], policy: Policy = { rules: [] }, tenant = 'acme') => buildPlan({ calls, tenant, catalog, policy });
  const policyEdge = (from: string, to: string, reason: string): Edge => ({ from, to, kind: 'policy', reason });

  it('a tool`s after orders every call of the named tool first', () => {
    const p = plan([
      { id: 'd', tool: 'deploy_web' },
      { id: 't1', tool: 'run_tests' },
      { id: 't2', tool: 'run_tests' },
      { id: 'b', tool: 'build' },
    ]);
    expect(p.edges).toEqual([
      policyEdge('t1', 'd', 'tool deploy_web: deploy_web after run_tests'),
      policyEdge('t2', 'd', 'tool deploy_web: deploy_web after run_tests'),
    ]);
    expect(p.generations).toEqual([['t1', 't2', 'b'], ['d']]);
    expect(p.diagnostics).toEqual([]);
  });

  it('after without a matching call adds nothing and is no error', () => {
    const p = plan([{ id: 'd', tool: 'deploy_web' }]);
    expect(p.edges).toEqual([]);
    expect(p.calls[0]?.error).toBeUndefined();
  });

  it('a rule`s after: glob on the tool, and globs in after', () => {
    const p = plan(
      [
        { id: 'd', tool: 'deploy_web' },
        { id: 'a', tool: 'approve_release' },
        { id: 'b', tool: 'build' },
        { id: 'x', tool: 'backup' },
      ],
      { rules: [{ match: { tool: 'deploy_*' }, after: ['approve_*', 'b*'] }] },
    );
    expect(p.edges).toEqual([
      policyEdge('a', 'd', 'policy rule 1 (tool deploy_*): deploy_web after approve_release'),
      policyEdge('b', 'd', 'policy rule 1 (tool deploy_*): deploy_web after build'),
      policyEdge('x', 'd', 'policy rule 1 (tool deploy_*): deploy_web after backup'),
    ]);
  });

  it('a rule`s after by risk and by tenant', () => {
    const policy: Policy = {
      rules: [
        { match: { risk: 'dangerous' }, after: ['backup'], review: false },
        { match: { tenant: 'prod-*', tool: 'rm_tmp' }, after: ['backup'] },
      ],
    };
    const calls: C[] = [
      { id: 'r', tool: 'rm_rf' },
      { id: 't', tool: 'rm_tmp' },
      { id: 'b', tool: 'backup' },
    ];
    expect(plan(calls, policy, 'prod-eu').edges).toEqual([
      policyEdge('b', 'r', 'policy rule 1 (risk dangerous): rm_rf after backup'),
      policyEdge('b', 't', 'policy rule 2 (tool rm_tmp, tenant prod-*): rm_tmp after backup'),
    ]);
    expect(plan(calls, policy, 'dev').edges).toEqual([policyEdge('b', 'r', 'policy rule 1 (risk dangerous): rm_rf after backup')]);
  });

  it('the same predecessor named twice gives one edge (the first reason)', () => {
    const p = plan(
      [
        { id: 'd', tool: 'deploy_web' },
        { id: 't', tool: 'run_tests' },
      ],
      { rules: [{ match: { tool: 'deploy_web' }, after: ['run_*'] }] },
    );
    expect(p.edges).toEqual([policyEdge('t', 'd', 'tool deploy_web: deploy_web after run_tests')]);
  });

  it('requires with a matching call is an edge', () => {
    const p = plan([
      { id: 'd', tool: 'deploy_db' },
      { id: 's', tool: 'service_exists' },
    ]);
    expect(p.edges).toEqual([policyEdge('s', 'd', 'tool deploy_db: deploy_db requires service_exists')]);
    expect(p.calls[0]?.error).toBeUndefined();
    expect(p.diagnostics).toEqual([]);
  });

  it('requires without a matching call fails with missing_required_predecessor', () => {
    const p = plan([
      { id: 'd', tool: 'deploy_db' },
      { id: 'b', tool: 'build' },
    ]);
    expect(p.edges).toEqual([]);
    expect(p.calls[0]?.error).toEqual({
      code: 'missing_required_predecessor',
      message: 'd: tool deploy_db requires a call of service_exists in the run, and there is none',
      details: { requires: 'service_exists' },
    });
    expect(p.diagnostics).toEqual([{ code: 'missing_required_predecessor', message: p.calls[0]?.error?.message, callId: 'd' }]);
    expect(p.calls[1]?.error).toBeUndefined();
  });

  it('requires from a rule, and a call does not satisfy its own requires', () => {
    const policy: Policy = { rules: [{ match: { tool: 'backup' }, requires: ['backup'] }] };
    const one = plan([{ id: 'b', tool: 'backup' }], policy);
    expect(one.calls[0]?.error?.code).toBe('missing_required_predecessor');
    expect(one.calls[0]?.error?.message).toBe('b: policy rule 1 (tool backup) requires a call of backup in the run, and there is none');
  });

  it('deny fails the call with policy_denied, and only that call', () => {
    const p = plan(
      [
        { id: 'r', tool: 'rm_tmp' },
        { id: 'b', tool: 'build' },
      ],
      { rules: [{ match: { tool: 'rm_*', tenant: 'trial' }, deny: 'trial tenants cannot delete' }] },
      'trial',
    );
    expect(p.calls[0]?.error).toEqual({
      code: 'policy_denied',
      message: 'r: trial tenants cannot delete',
      details: { tool: 'rm_tmp' },
    });
    expect(p.diagnostics).toEqual([{ code: 'policy_denied', message: 'r: trial tenants cannot delete', callId: 'r' }]);
    expect(p.calls[1]?.error).toBeUndefined();
  });

  it('deny does not apply to another tenant', () => {
    const p = plan([{ id: 'r', tool: 'rm_tmp' }], { rules: [{ match: { tool: 'rm_*', tenant: 'trial' }, deny: 'no' }] }, 'acme');
    expect(p.calls[0]?.error).toBeUndefined();
  });

  it('an allow rule does not bypass a deny', () => {
    const p = plan([{ id: 'r', tool: 'rm_rf' }], {
      rules: [
        { match: { tool: 'rm_rf' }, allow: true },
        { match: { risk: 'dangerous' }, deny: 'no dangerous tools here' },
      ],
    });
    expect(p.calls[0]?.error?.code).toBe('policy_denied');
    expect(p.calls[0]?.review).toBeUndefined();
  });

  it('a denied call`s after and requires add no edges', () => {
    const p = plan(
      [
        { id: 'd', tool: 'deploy_web' },
        { id: 't', tool: 'run_tests' },
      ],
      { rules: [{ match: { tool: 'deploy_web' }, deny: 'frozen' }] },
    );
    expect(p.edges).toEqual([]);
  });

  it.each<[string, Policy, string, string | undefined]>([
    ['review: true', { rules: [{ match: { tool: 'build' }, review: true }] }, 'build', 'policy rule 1 (tool build) asks for review'],
    ['no rule, not dangerous', { rules: [] }, 'build', undefined],
    ['dangerous by default', { rules: [] }, 'chmod', 'chmod is dangerous'],
    ['dangerous, waived by review: false', { rules: [{ match: { tool: 'chmod' }, review: false }] }, 'chmod', undefined],
    ['dangerous, waived by allow', { rules: [{ match: { tool: 'ch*' }, allow: true }] }, 'chmod', undefined],
    ['dangerous, a waiver for another tool', { rules: [{ match: { tool: 'rm_rf' }, review: false }] }, 'chmod', 'chmod is dangerous'],
  ])('review: %s', (_label, policy, toolName, review) => {
    const p = plan([{ id: 'c', tool: toolName }], policy);
    expect(p.calls[0]?.review).toBe(review);
    expect(p.calls[0]?.error).toBeUndefined();
    expect(p.diagnostics).toEqual([]);
  });
});
