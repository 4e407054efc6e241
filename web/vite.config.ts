// The dashboard's build: web/ → dist/web (index.html plus content-hashed files under assets/, which
// the server caches for a year). React's automatic JSX runtime through Vite's own transformer; no
// plugin needed. Run by scripts/generate.mjs, so `npm install` builds it.
import { fileURLToPath } from 'node:url';
import { defineConfig } from 'vite';

const root = fileURLToPath(new URL('.', import.meta.url));

export default defineConfig({
  root,
  base: '/',
  logLevel: 'warn',
  // Production JSX even when built from a test run (NODE_ENV=test would select jsxDEV).
  oxc: { jsx: { runtime: 'automatic', development: false } },
  define: { 'process.env.NODE_ENV': JSON.stringify('production') },
  build: {
    outDir: fileURLToPath(new URL('../dist/web', import.meta.url)),
    emptyOutDir: true,
    assetsDir: 'assets',
    target: 'es2022',
    sourcemap: false,
    reportCompressedSize: false,
  },
});
