/**
 * Several replicas for tests: the bench's harness (src/bench/replicas.ts), which the chaos script and
 * the replica benchmarks start too.
 */
export { ClusterTools, maxOverlap, startCluster, type Attempt, type ClusterOptions, type TestCluster } from '../../src/bench/replicas.js';
