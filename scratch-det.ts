import { detectBubblewrap } from '/work/main/src/tools/sandbox/bubblewrap-detect.ts';
import { createRunFolders } from '/work/main/src/tools/sandbox/run-folders.ts';
import pino from "/work/main/node_modules/pino/pino.js";
const logger = pino({ level: 'silent' });
for (let i = 0; i < 4; i++) {
  const t0 = performance.now();
  const folders = await createRunFolders({ logger });
  const t1 = performance.now();
  const d = await detectBubblewrap({ tempDir: folders.path });
  const t2 = performance.now();
  await folders.close();
  console.log('folders', (t1 - t0).toFixed(1), 'detect', (t2 - t1).toFixed(1), d.available);
}
