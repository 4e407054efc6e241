import type { BuildOptions, Plugin } from 'esbuild';

export const NODE_TARGET: string;
export const builtinsOnUse: Plugin;
export function nodeBundleOptions(entry: string, overrides?: BuildOptions): BuildOptions;
export const asciiOutput: Plugin;
