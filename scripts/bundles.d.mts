import type { BuildOptions } from 'esbuild';

export const AGENT: BuildOptions & { outfile: string };
export const SERVER: BuildOptions & { outfile: string; external: string[] };
export function staleReason(bundle: BuildOptions): string | null;
export function buildBundle(bundle: BuildOptions): Promise<number>;
