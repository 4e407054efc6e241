// Running sessions with started sandboxes and their sandbox tokens, written directly (no
// provisioning): the reporters of telemetry benches and the soak.
import type { Services } from '../../resolvers/services';

export interface ReportingSandbox {
  sandboxId: string;
  token: string;
}

export async function seedReportingSandboxes(
  services: Pick<Services, 'db' | 'tokens'>,
  owner: { accountId: string; userId: string },
  count: number,
  name: string,
): Promise<ReportingSandbox[]> {
  const { db, tokens } = services;
  const project = await db.project.create({
    data: { accountId: owner.accountId, name, repositoryUrl: '/dev/null' },
  });
  const out: ReportingSandbox[] = [];
  for (let i = 0; i < count; i++) {
    const session = await db.session.create({
      data: {
        accountId: owner.accountId,
        projectId: project.id,
        userId: owner.userId,
        status: 'RUNNING',
        branchName: `${name}-${i}`,
        baseRef: 'main',
      },
    });
    const sandbox = await db.sandbox.create({
      data: {
        sessionId: session.id,
        accountId: owner.accountId,
        provider: 'LOCAL',
        status: 'STARTED',
        cpu: 2,
        memoryGiB: 4,
        diskGiB: 20,
      },
    });
    const token = await tokens.mintSandboxToken({
      accountId: owner.accountId,
      userId: owner.userId,
      projectId: project.id,
      sessionId: session.id,
      sandboxId: sandbox.id,
      agent: 'build',
    });
    out.push({ sandboxId: sandbox.id, token });
  }
  return out;
}
