/**
 * A minimal OpenAI-compatible model server for benchmarks: POST /v1/chat/completions answers at once with a short
 * streamed reply (or a plain JSON completion when `stream` is false). Run as its own process so that it does not
 * share an event loop with what is measured.
 */
import { createServer } from 'node:http';

const REPLY = ['Hello', ' from', ' the', ' stub.'];

function chunk(id: string, delta: Record<string, unknown>, finish: string | null): string {
  return `data: ${JSON.stringify({ id, object: 'chat.completion.chunk', created: 0, model: 'stub', choices: [{ index: 0, delta, finish_reason: finish }] })}\n\n`;
}

const server = createServer((request, response) => {
  let body = '';
  request.on('data', (data: Buffer) => {
    body += data.toString();
  });
  request.on('end', () => {
    if (request.method !== 'POST' || !request.url?.endsWith('/chat/completions')) {
      response.writeHead(404).end();
      return;
    }
    const stream = (JSON.parse(body) as { stream?: boolean }).stream === true;
    const id = `chatcmpl-${Date.now()}`;
    if (!stream) {
      response.writeHead(200, { 'content-type': 'application/json' });
      response.end(
        JSON.stringify({
          id,
          object: 'chat.completion',
          created: 0,
          model: 'stub',
          choices: [{ index: 0, message: { role: 'assistant', content: REPLY.join('') }, finish_reason: 'stop' }],
          usage: { prompt_tokens: 5, completion_tokens: 4, total_tokens: 9 },
        }),
      );
      return;
    }
    response.writeHead(200, { 'content-type': 'text/event-stream' });
    let out = chunk(id, { role: 'assistant', content: '' }, null);
    for (const piece of REPLY) out += chunk(id, { content: piece }, null);
    out += chunk(id, {}, 'stop');
    out += `data: ${JSON.stringify({ id, object: 'chat.completion.chunk', created: 0, model: 'stub', choices: [], usage: { prompt_tokens: 5, completion_tokens: 4, total_tokens: 9 } })}\n\n`;
    out += 'data: [DONE]\n\n';
    response.end(out);
  });
});
server.listen(0, '127.0.0.1', () => {
  const address = server.address();
  if (typeof address === 'object' && address !== null)
    process.stdout.write(`listening on http://127.0.0.1:${address.port}\n`);
});
process.on('SIGTERM', () => server.close(() => process.exit(0)));
