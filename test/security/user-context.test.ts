// Attack (6): the daemon accepted user-context headers whose `iat` lay years in the future, and so
// lived far past the TTL cap. Forged and expired ones were already refused (regression rows).
import { expect, test } from 'vitest';
import { signUserContext, verifyUserContext } from '../../contract/user-context';

const TOKEN = 'sandbox-token';
const now = Math.floor(Date.now() / 1000);
const header = (nowSeconds: number, token = TOKEN) =>
  signUserContext({ sessionId: 's1', userId: 'u1', audience: 'control', nowSeconds }, token);

test.each([
  ['issued a year ahead', header(now + 365 * 86_400), 401, 'user context issued in the future'],
  ['issued 31 s ahead', header(now + 31), 401, 'user context issued in the future'],
  ['expired', header(now - 600), 401, 'user context expired'],
  ['signed with another token', header(now, 'other-token'), 401, 'bad user context signature'],
])('a header %s is refused', (_name, value, status, reason) => {
  expect(verifyUserContext(value, TOKEN, 's1', now)).toEqual({ ok: false, status, reason });
});

test('a header within the clock-skew allowance passes', () => {
  const result = verifyUserContext(header(now + 20), TOKEN, 's1', now);
  expect(result.ok).toBe(true);
});
