// Runs the README's flow through herald's TypeScript client: openapi-fetch over the types
// openapi-typescript generated from herald's /openapi.json (clients/typescript/generated), and
// the hand-written send that retries with the same key (clients/typescript/herald.mjs). Prints
// one JSON line of what it saw, for tests/clients.rs to check against the database; exits
// non-zero, naming the step, on the first answer that breaks the document.
//
// Usage: node client_flow.mjs BASE_URL TOKEN LIMITED_TOKEN (run beside herald.mjs)
// LIMITED_TOKEN: a token held to one notification a second, burst 1.
import { connect, send } from './herald.mjs';

const [base, token, limitedToken] = process.argv.slice(2);

function check(condition, step, seen) {
  if (!condition) {
    console.error(`${step}: ${JSON.stringify(seen)}`);
    process.exit(1);
  }
}

/** @returns {import('./generated/schema.js').components['schemas']['NotificationRequest']} */
function readmeRequest(extra = {}) {
  return {
    channel: 'email',
    to: 'ada@example.com',
    subject: 'Your export is ready',
    text: 'Download it at https://example.com/x',
    metadata: { export: 'export-42' },
    ...extra,
  };
}

const api = connect(base, token);

// Enqueue with an idempotency key, through the send that would retry with it.
const first = await send(api, readmeRequest(), { idempotencyKey: 'ts-export-42' });
check(first.response.status === 202 && first.tries === 1, 'enqueue', [first.response.status, first.tries]);
const id = first.data?.id;
check(typeof id === 'string', 'enqueue body', first.data);
check(first.response.headers.get('location') === `/v1/notifications/${id}`, 'enqueue Location',
  first.response.headers.get('location'));

// Read it back until the built-in sandbox route has delivered it.
const deadline = Date.now() + 30_000;
let shown;
for (;;) {
  const read = await api.GET('/v1/notifications/{id}', { params: { path: { id } } });
  shown = read.data;
  check(shown !== undefined, 'show', read.error);
  if (shown.state === 'delivered') break;
  check(Date.now() < deadline, 'delivered within 30 s', shown);
  await new Promise((resolve) => setTimeout(resolve, 50));
}
check(shown.certainty === 'known', 'delivered certainty', shown);

// The same key and body again: the first answer, marked as a replay.
const replay = await send(api, readmeRequest(), { idempotencyKey: 'ts-export-42' });
check(replay.response.headers.get('idempotent-replayed') === 'true', 'replay header', replay.response.status);
check(replay.data?.id === id, 'replay names the first', replay.data);

// A refusal is returned as it came, typed as a problem: no retry for a 422.
const refused = await send(api, readmeRequest({ to: 'not an address' }));
check(refused.response.status === 422 && refused.tries === 1, 'a 422 is not retried',
  [refused.response.status, refused.tries]);
check(refused.error?.field === 'to', 'the problem names the field', refused.error);

// A token over its rate: the send waits out Retry-After and tries again with the same key.
const limited = connect(base, limitedToken);
const calm = await send(limited, readmeRequest(), { idempotencyKey: 'ts-limited-1' });
check(calm.response.status === 202, 'a first send within the burst', calm.response.status);
const hurried = await send(limited, readmeRequest(), { idempotencyKey: 'ts-limited-2' });
check(hurried.response.status === 202 && hurried.tries === 2, 'the retried send',
  [hurried.response.status, hurried.tries]);
check(hurried.waited.length === 1 && [1000, 2000].includes(hurried.waited[0]),
  'one 429, waited out as Retry-After said', hurried.waited);
// The retry carried the key the first try had: the same key now names that notification.
const again = await send(limited, readmeRequest(), { idempotencyKey: 'ts-limited-2' });
check(again.response.headers.get('idempotent-replayed') === 'true', 'a replay', again.response.status);
check(again.data?.id === hurried.data?.id, 'the retried one', again.data);

console.log(JSON.stringify({
  id,
  replayed_id: replay.data?.id,
  limited_ids: [calm.data?.id, hurried.data?.id],
  limited_tries: hurried.tries,
}));
