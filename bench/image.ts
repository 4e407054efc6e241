// The control-plane image (deploy/Dockerfile): its size against the base image it starts FROM, and
// what building it cost when it was not already built from the same inputs.
import { type PodmanService, startPodmanService } from '../test/support/podman';
import { imageSize, serverImage } from '../test/support/server-image';
import { type BenchResult, runIfMain } from './support/harness';
export type { BenchResult };

export async function run(): Promise<BenchResult[]> {
  let podman: PodmanService | null = null;
  try {
    podman = await startPodmanService();
    const image = serverImage(podman.containersConf);
    const size = imageSize(image.ref, podman.containersConf);
    const base = imageSize(image.base, podman.containersConf);
    const mb = (bytes: number) => Number((bytes / 1e6).toFixed(1));
    return [
      {
        name: 'image: control plane, total',
        value: mb(size),
        unit: 'MB',
        baseline: mb(base),
        note: `${image.ref}; baseline = the base image (Debian minbase, git, Node.js 24)`,
      },
      {
        name: 'image: control plane, added to the base',
        value: mb(size - base),
        unit: 'MB',
        note: image.built
          ? `built in ${(image.buildMs / 1000).toFixed(1)} s`
          : 'already built from the same inputs',
      },
    ];
  } finally {
    await podman?.stop();
  }
}

runIfMain(import.meta.url, run);
