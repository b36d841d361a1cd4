import pg from 'pg';
import { startPostgres } from '../src/bench/postgres-cluster.js';
import { migratePostgres } from '../src/store/postgres-migrate.js';
const pgc = await startPostgres();
const url = await pgc.createDatabase();
const pool = new pg.Pool({ connectionString: url });
await migratePostgres(pool as any);
await pool.query(`INSERT INTO runs (id, tenant, status, failure, created_at, last_seq) SELECT 'r'||g, 'bench', 'succeeded', 'fail_fast', 0, 18 FROM generate_series(1, 3000) g`);
// no analyze
const q = `EXPLAIN (ANALYZE, COSTS) UPDATE runs r SET last_seq = u.to_seq, status = coalesce(u.status, r.status), ended_at = CASE WHEN u.status IS NULL THEN r.ended_at ELSE u.ended_at END, call_count = r.call_count + u.add_calls
 FROM unnest($1::text[], $2::int4[], $3::int4[], $4::text[], $5::int8[], $6::int4[]) AS u(id, from_seq, to_seq, status, ended_at, add_calls) WHERE r.id = u.id AND r.last_seq = u.from_seq`;
const r = await pool.query(q, [['r5','r6','r7'], [18,18,18], [19,19,19], [null,null,null], [null,null,null], [0,0,0]]);
console.log(r.rows.map((x) => x['QUERY PLAN']).join('\n'));
await pool.end();
pgc.stop?.();
process.exit(0);
