import { StatementSync } from 'node:sqlite';
import { it } from 'vitest';
import { flows } from '../helpers/fixtures.ts';
import { createHarness } from '../helpers/harness.ts';

it('counts statements per turn', async () => {
  const log: string[] = [];
  let on = false;
  for (const method of ['all', 'run', 'iterate'] as const) {
    const original = StatementSync.prototype[method] as (...args: unknown[]) => unknown;
    (StatementSync.prototype as any)[method] = function (this: StatementSync, ...args: unknown[]) {
      if (on) log.push(this.sourceSQL.replace(/\s+/g, ' ').slice(0, 160));
      return original.apply(this, args);
    };
  }
  const h = await createHarness('sqlite');
  const flow = flows(h);
  const agentId = await flow.createAgent({});
  const sessionId = await flow.createSession(agentId);
  for (let i = 0; i < 3; i++) {
    const accepted = await flow.submit(sessionId, 'hello');
    await flow.waitForMessage(sessionId, accepted.id);
  }
  await new Promise((r) => setTimeout(r, 300));
  on = true;
  const accepted = await flow.submit(sessionId, 'hello');
  const posted = log.length;
  await new Promise((r) => setTimeout(r, 500));
  on = false;
  const engine = log.slice(posted);
  console.log(
    `POST: ${posted} statements\n${log.slice(0, posted).join('\n')}\n\nENGINE: ${engine.length}\n${engine.join('\n')}`,
  );
  await flow.waitForMessage(sessionId, accepted.id);
  await h.close();
});
