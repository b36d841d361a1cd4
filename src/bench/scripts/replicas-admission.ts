/**
 * `maxActiveRunsPerTenant` across replicas (DESIGN §12), a reproduction the chaos script found
 * (`npx tsx src/bench/scripts/replicas-admission.ts`): three replicas with a cap of 2 active runs per
 * tenant; each round sends 6 submissions of one tenant at once, 2 to each replica, each run held until
 * all have started. Then the same on one replica. Prints how many each round accepted; exits 1 when a
 * round accepted more than the cap.
 */
import { startCluster } from '../replicas.js';

const CAP = 2;
const yaml = (u: string) => `
tools:
  - name: hold_idem
    reads: []
    writes: []
    idempotent: true
    executor: { kind: http, url: "${u}/hold_idem" }
limits:
  maxActiveRunsPerTenant: ${CAP}
`;

const c = await startCluster(3, yaml, { leaseMs: 10000, logLevel: 'warn' });
let over = 0;
try {
  const round = async (name: string, replicaOf: (k: number) => number) => {
    const answers = await Promise.all(Array.from({ length: 6 }, (_, k) => c.request(replicaOf(k), 'POST', '/v1/runs', { tenant: name, calls: [{ id: 'h', tool: 'hold_idem', args: { hold: true } }] })));
    const ids = answers.filter((a) => a.status === 201).map((a) => a.body.id as string);
    while (!ids.every((id) => c.tools.of(id).length > 0)) await new Promise((r) => setTimeout(r, 20));
    const running = c.tools.attempts.filter((a) => ids.includes(a.runId) && a.end === undefined).length;
    console.log(`${name}: 6 submissions at once, cap ${CAP}: ${ids.length} accepted (${answers.map((a) => a.status).join(' ')}), ${running} running at once`);
    if (ids.length > CAP) over++;
    c.tools.release();
    for (const id of ids) await c.ended(0, id);
  };
  for (let k = 0; k < 5; k++) await round(`spread${k}`, (i) => i % 3);
  for (let k = 0; k < 3; k++) await round(`one${k}`, () => 0);
} finally {
  await c.close();
}
process.exit(over > 0 ? 1 : 0);
