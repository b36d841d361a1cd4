/**
 * The one reading of database driver errors (store/errors.ts `isUnavailableError`) and the one error
 * handler's answer for them (api/errors.ts): whatever the driver says when the database is away (a
 * terminated backend, the pool's connect bound, a statement past its bound, a refused socket, an
 * 08/53/57/58 SQLSTATE) is `503 store_unavailable` with `Retry-After`; a statement's own error is not.
 */
import { describe, expect, it } from 'vitest';
import { httpErrorOf } from '../../src/api/errors.js';
import { isUnavailableError, StoreError } from '../../src/store/errors.js';

const withCode = (message: string, code?: string) => Object.assign(new Error(message), code === undefined ? {} : { code });

describe('isUnavailableError', () => {
  it.each([
    ['a terminated backend (57P01)', withCode('terminating connection due to administrator command', '57P01')],
    ['a crash shutdown (57P02)', withCode('terminating connection due to crash of another server process', '57P02')],
    ['a server starting (57P03)', withCode('the database system is starting up', '57P03')],
    ['a connection failure (08006)', withCode('connection failure', '08006')],
    ['too many connections (53300)', withCode('sorry, too many clients already', '53300')],
    ['statement_timeout (57014)', withCode('canceling statement due to statement timeout', '57014')],
    ['the pool full past its bound', new Error('timeout exceeded when trying to connect')],
    ['a connect past its bound', new Error('Connection terminated due to connection timeout')],
    ['a lost connection', new Error('Connection terminated unexpectedly')],
    ['a statement past query_timeout', new Error('Query read timeout')],
    ['a client cut off', new Error('Client has encountered a connection error and is not queryable')],
    ['a refused socket', withCode('connect ECONNREFUSED 127.0.0.1:5432', 'ECONNREFUSED')],
    ['a reset socket', withCode('read ECONNRESET', 'ECONNRESET')],
    ['a cause that is one', new Error('wrapped', { cause: withCode('x', 'ECONNRESET') })],
    ['a store_unavailable StoreError', new StoreError('store_unavailable', 'gone')],
  ])('%s: unavailable, and 503 store_unavailable with Retry-After', (_what, err) => {
    expect(isUnavailableError(err)).toBe(true);
    const answer = httpErrorOf(err);
    expect(answer).toMatchObject({ status: 503, headers: { 'retry-after': '1' }, unexpected: false });
    expect(answer.body.error.code).toBe('store_unavailable');
  });

  it.each([
    ['a syntax error (42601)', withCode('syntax error at or near "x"', '42601')],
    ['a unique violation (23505)', withCode('duplicate key value violates unique constraint', '23505')],
    ['a plain bug', new TypeError("Cannot read properties of undefined (reading 'x')")],
    ['a store rule', new StoreError('seq_out_of_order', 'seq 3 after 1')],
    ['nothing', undefined],
  ])('%s: not unavailable (a 500 if it reaches the API)', (_what, err) => {
    expect(isUnavailableError(err)).toBe(false);
    expect(httpErrorOf(err).status).toBe(500);
  });
});
