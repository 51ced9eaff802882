// @ts-check
// Enqueue through openapi-fetch, typed by the schema openapi-typescript generated from herald's
// /openapi.json (generated/schema.d.ts), the way herald's contract asks: one idempotency key per
// notification, made once and sent again on every retry, so that a retry after a lost answer is
// answered with the first notification instead of making a second. A retry happens only where
// herald says one is safe: 429 and 503 after the Retry-After they carry, other 5xx answers and
// lost connections after a growing pause with jitter. Every other answer is returned as it came.
//
//   import { connect, send } from './herald.mjs';
//   const api = connect('http://127.0.0.1:8080', token);
//   const sent = await send(api, { channel: 'email', to: 'ada@example.com', … }, { idempotencyKey: 'export-42' });
//   sent.data?.id
import createClient from 'openapi-fetch';

/** @typedef {import('./generated/schema.js').paths} paths */
/** @typedef {import('./generated/schema.js').components['schemas']['NotificationRequest']} NotificationRequest */
/** @typedef {import('openapi-fetch').Client<paths>} Api */

/** The answers herald gives when the same request may succeed later. */
export const RETRYABLE = new Set([429, 500, 502, 503, 504]);

/**
 * A client for the herald at `baseUrl`, authenticated with `token`.
 * @param {string} baseUrl
 * @param {string} token
 * @returns {Api}
 */
export function connect(baseUrl, token) {
  return createClient({ baseUrl, headers: { Authorization: `Bearer ${token}` } });
}

/**
 * Enqueues `body` under `idempotencyKey` (a new UUID if none), trying up to `tries` times.
 * @param {Api} api
 * @param {NotificationRequest} body
 * @param {{ idempotencyKey?: string, tries?: number, baseDelayMs?: number, maxDelayMs?: number,
 *           sleep?: (ms: number) => Promise<void> }} [options]
 */
export async function send(api, body, options = {}) {
  const {
    idempotencyKey = crypto.randomUUID(),
    tries = 5,
    baseDelayMs = 500,
    maxDelayMs = 30_000,
    sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms)),
  } = options;
  /** @type {number[]} */
  const waited = [];
  for (let attempt = 1; ; attempt++) {
    let result;
    try {
      result = await api.POST('/v1/notifications', {
        params: { header: { 'Idempotency-Key': idempotencyKey } },
        body,
      });
    } catch (error) {
      // No answer: the first try may have been stored, which the same key makes harmless.
      if (attempt >= tries) throw error;
      const pause = backoff(attempt, baseDelayMs, maxDelayMs);
      waited.push(pause);
      await sleep(pause);
      continue;
    }
    const status = result.response.status;
    if (!RETRYABLE.has(status) || attempt >= tries) {
      return { ...result, key: idempotencyKey, tries: attempt, waited };
    }
    const pause = retryAfterMs(result.response.headers) ?? backoff(attempt, baseDelayMs, maxDelayMs);
    waited.push(pause);
    await sleep(pause);
  }
}

/**
 * `Retry-After` in milliseconds, written as seconds or as an HTTP date; null without one.
 * @param {Headers} headers
 * @returns {number | null}
 */
export function retryAfterMs(headers) {
  const value = headers.get('retry-after');
  if (value === null) return null;
  if (/^\d+$/.test(value.trim())) return Number(value.trim()) * 1000;
  const when = Date.parse(value);
  return Number.isNaN(when) ? null : Math.max(0, when - Date.now());
}

/**
 * Full jitter: a random pause up to `base * 2^(attempt-1)`, at most `cap`.
 * @param {number} attempt
 * @param {number} base
 * @param {number} cap
 */
function backoff(attempt, base, cap) {
  return Math.random() * Math.min(cap, base * 2 ** (attempt - 1));
}
