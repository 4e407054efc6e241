// Per-project templates on E2B: its template builder takes single-stage Dockerfiles without
// COPY --from, so the runtime layer installs the runtime with RUN steps (runtimeSource 'package').
// A single-stage template Dockerfile gets its own E2B template, built once and booted from; a
// multi-stage one falls back to the default template with a warning that says why and what to do.
// GraphQL createSession → provisioning → the real `e2b` SDK → the E2B emulator, which records the
// template builds and the template each sandbox was created from. The sandboxes run the emulators'
// stand-in daemon: these tests are about images (test/providers-e2e/lifecycle.test.ts runs the real one).
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, afterEach, beforeAll, describe, expect, test } from 'vitest';
import { repoRef } from '../../resolvers/git/project-repo';
import type { E2BEmulator } from '../emulators/e2b';
import { fakeDaemonCommand } from '../emulators/harness';
import {
  CreateSessionDocument,
  ProviderCreateProjectDocument,
  ProviderSessionDocument,
  ProviderSyncManifestDocument,
} from '../generated/graphql';
import { type TestApp, startTestApp } from '../support/app';
import { createTestRepo } from '../support/git';
import { waitFor } from '../support/wait';
import { type EmulatedProvider, startE2B } from './fixtures';

const HOBBY_DISK = 'diskGiB: 20 GiB exceeds the E2B cap of 10; clamped to 10';

const MANIFEST = `sandbox:
  default: single
  templates:
    - slug: single
      name: Single stage
      dockerfile: docker/single.Dockerfile
    - slug: multi
      name: Multi stage
      dockerfile: docker/multi.Dockerfile
    - slug: copies
      name: Copies from the repository
      dockerfile: docker/copies.Dockerfile
`;

const SINGLE = 'FROM ubuntu:24.04\nRUN echo single-stage-marker\n';
const MULTI = 'FROM node:22 AS build\nRUN echo build\n\nFROM ubuntu:24.04\nRUN echo final\n';
const COPIES = 'FROM ubuntu:24.04\nCOPY package.json /app/\n';

describe('per-project templates on E2B through its SDK and emulator', () => {
  const repo = createTestRepo({
    'singulacomp.yaml': MANIFEST,
    'docker/single.Dockerfile': SINGLE,
    'docker/multi.Dockerfile': MULTI,
    'docker/copies.Dockerfile': COPIES,
    'package.json': '{"name":"app"}\n',
  });
  const entryDir = mkdtempSync(join(tmpdir(), 'sc-e2b-tpl-entry-'));
  let emulated: EmulatedProvider & { emulator: E2BEmulator };
  let t: TestApp;
  let projectId: string;

  async function start(templateSlug: string): Promise<string> {
    const res = await t.request(CreateSessionDocument, { input: { projectId, templateSlug } });
    if (res.data?.createSession.__typename !== 'CreateSessionSuccess') throw new Error(JSON.stringify(res));
    return res.data.createSession.session.sessionId;
  }

  const read = async (id: string) => {
    const res = await t.request(ProviderSessionDocument, { id });
    if (!res.data?.session) throw new Error(JSON.stringify(res));
    return res.data.session;
  };

  const running = (id: string) =>
    waitFor(async () => {
      const s = await read(id);
      if (s.status === 'FAILED') throw new Error(`session failed: ${s.failureReason}`);
      return s.status === 'RUNNING' ? s : null;
    }, 60_000);

  /** The template the emulator created the session's sandbox from. */
  const bootedFrom = (providerSandboxId: string | null | undefined) =>
    emulated.emulator.get(providerSandboxId as string)?.templateID;

  beforeAll(async () => {
    emulated = await startE2B({ entryCommand: fakeDaemonCommand(entryDir) });
    t = await startTestApp({ providers: [emulated.provider] });
    const created = await t.request(ProviderCreateProjectDocument, {
      input: { name: 'e2b-templates', repositoryUrl: repo.url, provider: 'E2B' },
    });
    if (created.data?.createProject.__typename !== 'CreateProjectSuccess')
      throw new Error(JSON.stringify(created));
    projectId = created.data.createProject.project.id;
    const synced = await t.request(ProviderSyncManifestDocument, { input: { projectId } });
    if (synced.data?.syncProjectManifest.__typename !== 'SyncProjectManifestSuccess')
      throw new Error(JSON.stringify(synced));
  });

  afterEach(async () => {
    const live = await t.app.services.db.session.findMany({
      where: { status: { in: ['PROVISIONING', 'RUNNING'] } },
    });
    for (const s of live) await t.app.services.sessions.stopInternal(s.id, 'USER');
    await t.app.services.provisioner.drain();
  });

  afterAll(async () => {
    await t?.stop();
    await emulated?.close();
    rmSync(entryDir, { recursive: true, force: true });
  });

  test('a single-stage template Dockerfile triggers exactly one template build, and its sessions boot from that template', async () => {
    const first = await running(await start('single'));
    // The platform default disk of 20 GiB is over E2B Hobby's 10 GiB.
    expect(first.sandbox?.warnings).toEqual([HOBBY_DISK]);
    expect(first.sandbox?.snapshot).toMatchObject({ status: 'ACTIVE', provider: 'E2B' });
    expect(first.template?.snapshot?.key).toBe(first.sandbox?.snapshot?.key);
    expect(emulated.builds()).toBe(1);

    const row = await t.app.services.db.snapshot.findUniqueOrThrow({
      where: { provider_key: { provider: 'E2B', key: first.sandbox?.snapshot?.key as string } },
    });
    expect(row.providerRef).toBe(`singulacomp-${row.key}`);
    expect(bootedFrom(first.sandbox?.providerSandboxId)).toBe(row.providerRef);

    // What E2B was asked to build: the user's base image and steps, then the runtime layer as RUN
    // steps — no COPY (nothing to upload), no start command (the adapter launches the entry).
    const builds = emulated.emulator.templateBuilds();
    expect(builds).toHaveLength(1);
    const build = builds[0];
    expect(build?.templateID).toBe(row.providerRef);
    expect(build?.fromImage).toBe('ubuntu:24.04');
    expect(build?.startCmd ?? '').toBe('');
    const steps = build?.steps ?? [];
    expect(steps.filter((step) => step.type === 'COPY')).toEqual([]);
    const runs = steps.filter((step) => step.type === 'RUN').map((step) => step.args.join(' '));
    expect(runs[0]).toBe('echo single-stage-marker');
    expect(
      runs.some((command) => command.includes(`singulacomp-runtime-${row.runtimeVersion}-linux-x64.tar.gz`)),
    ).toBe(true);
    expect(steps).toContainEqual(expect.objectContaining({ type: 'WORKDIR', args: ['/workspace'] }));
    expect(steps).toContainEqual(
      // biome-ignore lint/suspicious/noTemplateCurlyInString: a Dockerfile variable, not a JS one
      expect.objectContaining({ type: 'ENV', args: ['PATH', '${PATH}:/opt/singulacomp/bin'] }),
    );

    // A second session reuses the template: no new build, same template booted.
    const second = await running(await start('single'));
    expect(second.sandbox?.snapshot?.key).toBe(row.key);
    expect(bootedFrom(second.sandbox?.providerSandboxId)).toBe(row.providerRef);
    expect(emulated.builds()).toBe(1);
    expect(emulated.emulator.templateBuilds()).toHaveLength(1);

    // The runtime source is part of the key: the same inputs planned for the image source differ.
    const session = await t.app.services.db.session.findUniqueOrThrow({
      where: { id: second.sessionId },
      include: { project: true },
    });
    const input = {
      repo: repoRef(session.project, t.app.services.keys.encryption),
      commit: session.baseCommit as string,
      template: { slug: 'single', dockerfile: 'docker/single.Dockerfile', image: null },
      spec: {
        cpu: second.sandbox?.cpu as number,
        memoryGiB: second.sandbox?.memoryGiB as number,
        diskGiB: second.sandbox?.diskGiB as number,
      },
    };
    const asPackage = await t.app.services.snapshots.plan({ ...input, runtimeSource: 'package' });
    const asImage = await t.app.services.snapshots.plan({ ...input, runtimeSource: 'image' });
    expect(asPackage.key).toBe(row.key);
    expect(asImage.key).not.toBe(row.key);
    expect(asImage.dockerfile).toContain('COPY --from=');
    expect(asPackage.dockerfile).not.toContain('COPY --from=');
  });

  test('a template that no longer boots fails its session, is marked FAILED, and the next session rebuilds it', async () => {
    const first = await running(await start('single'));
    const key = first.sandbox?.snapshot?.key as string;
    const where = { provider_key: { provider: 'E2B' as const, key } };
    const row = await t.app.services.db.snapshot.findUniqueOrThrow({ where });
    const buildsBefore = emulated.builds();
    // E2B lost the template's builds: a create from it answers 404 "template not found".
    emulated.emulator.failTemplate(row.providerRef as string);
    const refusedId = await start('single');
    const refused = await waitFor(async () => {
      const s = await read(refusedId);
      return s.status === 'FAILED' ? s : null;
    }, 60_000);
    expect(refused.failureReason).toContain('is unusable');
    expect((await t.app.services.db.snapshot.findUniqueOrThrow({ where })).status).toBe('FAILED');

    const rebuilt = await running(await start('single'));
    expect(emulated.builds()).toBe(buildsBefore + 1);
    expect(bootedFrom(rebuilt.sandbox?.providerSandboxId)).toBe(row.providerRef);
    expect((await t.app.services.db.snapshot.findUniqueOrThrow({ where })).status).toBe('ACTIVE');
  });

  test('a multi-stage template Dockerfile boots from the default template with a warning saying why and how to fix it', async () => {
    const buildsBefore = emulated.builds();
    const s = await running(await start('multi'));
    expect(s.sandbox?.snapshot).toBeNull();
    expect(s.sandbox?.warnings).toEqual([
      HOBBY_DISK,
      "E2B: no per-project image for template multi (docker/multi.Dockerfile): E2B's template builder accepts single-stage Dockerfiles only, and this one has 2 stages (FROM on lines 1, 4); make it single-stage (one FROM, no COPY --from) to get a per-project template; booted from the provider's default image",
    ]);
    expect(bootedFrom(s.sandbox?.providerSandboxId)).toBe('base');
    expect(emulated.builds()).toBe(buildsBefore);
    const rows = await t.app.services.db.snapshot.findMany({ where: { provider: 'E2B' } });
    expect(rows.map((r) => r.providerRef)).not.toContain('base');
  });

  test('a template Dockerfile that COPYs repository files falls back too, since E2B would upload them from the server', async () => {
    const buildsBefore = emulated.builds();
    const s = await running(await start('copies'));
    expect(s.sandbox?.snapshot).toBeNull();
    expect(s.sandbox?.warnings).toEqual([
      HOBBY_DISK,
      expect.stringMatching(
        /^E2B: no per-project image for template copies \(docker\/copies\.Dockerfile\): E2B's template builder uploads COPY sources from the server, not from the repository \(line 2\); fetch those files in a RUN step/,
      ),
    ]);
    expect(bootedFrom(s.sandbox?.providerSandboxId)).toBe('base');
    expect(emulated.builds()).toBe(buildsBefore);
  });
});
