// Issue 42, item 4: previews must never share the API's site. In production the server refuses to
// start (parseEnv throws before anything listens) when SINGULACOMP_PREVIEW_DOMAIN is the API's
// host or nested with it; with none configured the preview site is *.localhost, a site per name.
import { describe, expect, test } from 'vitest';
import { nestedHosts, previewSite } from '../../resolvers/gateway/access';
import { parseEnv } from '../../server/env';

const production =
  (previewDomain: string, publicUrl = 'https://app.example.com') =>
  () =>
    parseEnv({
      NODE_ENV: 'production',
      SINGULACOMP_PUBLIC_URL: publicUrl,
      SINGULACOMP_PREVIEW_DOMAIN: previewDomain,
    });

describe('the preview domain', () => {
  test.each([
    ['the API host itself', 'app.example.com'],
    ['the API host with a port', 'app.example.com:8443'],
    ['a domain the API host is inside', 'example.com'],
    ['a domain inside the API host', 'preview.app.example.com'],
    ['the API host in capitals', 'APP.example.com'],
  ])('production refuses %s', (_name, domain) => {
    expect(production(domain)).toThrow(/SINGULACOMP_PREVIEW_DOMAIN: .* the API's host or nested with it/);
  });

  test('production accepts a domain of its own, and development does not check', () => {
    expect(production('example-preview.net')().previewDomain).toBe('example-preview.net');
    expect(
      parseEnv({
        SINGULACOMP_PUBLIC_URL: 'http://app.example.com',
        SINGULACOMP_PREVIEW_DOMAIN: 'app.example.com',
      }).previewDomain,
    ).toBe('app.example.com');
  });

  test('unset, the preview site is *.localhost on the API port, with the API scheme', () => {
    expect(previewSite('http://127.0.0.1:4000', null)).toEqual({ protocol: 'http:', host: 'localhost:4000' });
    expect(previewSite('https://app.example.com', 'Preview.Example.NET')).toEqual({
      protocol: 'https:',
      host: 'preview.example.net',
    });
  });

  test.each([
    ['a.b', 'a.b', true],
    ['x.a.b', 'a.b', true],
    ['a.b', 'x.a.b', true],
    ['ab.c', 'b.c', false],
    ['preview.net', 'app.example.com', false],
  ])('%s and %s nested: %s', (a, b, nested) => {
    expect(nestedHosts(a, b)).toBe(nested);
  });
});
