/**
 * Test helpers for real processes: start `toolgraph serve` as a child process (the bench's, in
 * src/bench/child.ts), kill it (SIGKILL for crash tests), and poll an HTTP API with a deadline instead
 * of sleeping and hoping.
 */
export { BIN, ROOT, startServer, type ServerChild, type StartOptions } from '../../src/bench/child.js';

/** Probing until a child is where a test wants it (tests/helpers/wait.ts). */
export { until } from './wait.js';
