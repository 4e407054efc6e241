// A template's display name is optional: the source document's hardware-spec example (no name)
// parses in both formats, and the slug stands in for the name.
import { describe, expect, test } from 'vitest';
import { parseManifest } from '../../image/manifest';

describe('template names', () => {
  test('the hardware-spec example from the documentation parses, named by its slug', () => {
    const result = parseManifest(
      'singulacomp.yaml',
      'sandbox:\n  templates:\n    - slug: big\n      image: ubuntu:24.04\n      cpu: 4\n      memory: 8\n      disk: 50\n',
    );
    if (!result.ok) throw new Error(JSON.stringify(result.errors));
    expect(result.manifest.templates).toEqual([
      {
        slug: 'big',
        name: 'big',
        source: { kind: 'image', reference: 'ubuntu:24.04' },
        spec: { cpu: 4, memoryGiB: 8, diskGiB: 50 },
      },
    ]);
    expect(result.warnings).toEqual([]);
  });

  test('the legacy TOML manifest takes the same default, and a given name still wins', () => {
    const result = parseManifest(
      'singulacomp.toml',
      '[[sandbox.templates]]\nslug = "api"\nimage = "node:22"\n\n[[sandbox.templates]]\nslug = "web"\nname = "Web app"\nimage = "node:22"\n',
    );
    if (!result.ok) throw new Error(JSON.stringify(result.errors));
    expect(result.manifest.templates.map((t) => [t.slug, t.name])).toEqual([
      ['api', 'api'],
      ['web', 'Web app'],
    ]);
  });

  test('a name that is present but empty is still an error at its field', () => {
    const result = parseManifest(
      'singulacomp.yaml',
      'sandbox:\n  templates:\n    - { slug: a, name: "", image: x }\n',
    );
    expect(result.ok).toBe(false);
    if (!result.ok) expect(result.errors.map((e) => e.field.join('.'))).toEqual(['sandbox.templates.0.name']);
  });
});
