// Browser tests of the dashboard: Debian's Chromium driven by playwright-core, every page watched for
// console errors, screenshots checked for content, and axe-core run inside the page.
import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { inflateSync } from 'node:zlib';
import { type Browser, type BrowserContext, type Page, chromium } from 'playwright-core';

const CHROMIUM = process.env.CHROMIUM_PATH ?? '/usr/bin/chromium';
const FLAGS = [
  '--headless',
  '--no-sandbox',
  '--disable-gpu',
  '--disable-background-networking',
  '--disable-component-update',
  '--no-first-run',
  '--disable-sync',
  '--disable-quic',
];

export function launchBrowser(): Promise<Browser> {
  return chromium.launch({ executablePath: CHROMIUM, args: FLAGS });
}

/** 127.0.0.1, and the preview site's *.localhost names (Chromium resolves them to loopback itself). */
export function isLoopbackHost(hostname: string): boolean {
  return hostname === '127.0.0.1' || hostname === 'localhost' || hostname.endsWith('.localhost');
}

export interface WatchedPage {
  context: BrowserContext;
  page: Page;
  /** Console errors, uncaught exceptions and requests that left loopback, as they happened. */
  problems: string[];
}

/** A page in a context of its own that refuses anything off loopback (no CDN, no network). */
export async function openPage(
  browser: Browser,
  viewport = { width: 1280, height: 900 },
): Promise<WatchedPage> {
  const context = await browser.newContext({ viewport });
  const problems: string[] = [];
  await context.route('**/*', async (route) => {
    const url = new URL(route.request().url());
    if (url.protocol === 'data:' || url.protocol === 'blob:' || isLoopbackHost(url.hostname)) {
      await route.continue();
    } else {
      problems.push(`request off loopback: ${url.href}`);
      await route.abort('internetdisconnected');
    }
  });
  const page = await context.newPage();
  page.on('console', (message) => {
    if (message.type() === 'error') problems.push(`console error: ${message.text()}`);
  });
  page.on('pageerror', (error) => problems.push(`page error: ${error.message}`));
  return { context, page, problems };
}

export interface PngSummary {
  width: number;
  height: number;
  /** Distinct RGBA colours. */
  colours: number;
}

/** Decodes an 8-bit, non-interlaced PNG (what Chromium writes) and counts its distinct colours. */
export function summarisePng(png: Buffer): PngSummary {
  if (png.subarray(1, 4).toString('latin1') !== 'PNG') throw new Error('not a PNG');
  let pos = 8;
  let width = 0;
  let height = 0;
  let channels = 0;
  const idat: Buffer[] = [];
  while (pos < png.length) {
    const length = png.readUInt32BE(pos);
    const type = png.subarray(pos + 4, pos + 8).toString('latin1');
    const data = png.subarray(pos + 8, pos + 8 + length);
    if (type === 'IHDR') {
      width = data.readUInt32BE(0);
      height = data.readUInt32BE(4);
      const [depth, colourType, , , interlace] = [data[8], data[9], data[10], data[11], data[12]];
      channels = ({ 0: 1, 2: 3, 4: 2, 6: 4 } as Record<number, number>)[colourType!] ?? 0;
      if (depth !== 8 || interlace !== 0 || channels === 0) throw new Error('unsupported PNG layout');
    } else if (type === 'IDAT') idat.push(data);
    pos += 12 + length;
  }
  const raw = inflateSync(Buffer.concat(idat));
  const stride = width * channels;
  let previous = Buffer.alloc(stride);
  const colours = new Set<string>();
  for (let y = 0; y < height; y++) {
    const offset = y * (stride + 1);
    const filter = raw[offset]!;
    const line = Buffer.from(raw.subarray(offset + 1, offset + 1 + stride));
    for (let x = 0; x < stride; x++) {
      const left = x >= channels ? line[x - channels]! : 0;
      const up = previous[x]!;
      const upLeft = x >= channels ? previous[x - channels]! : 0;
      let add = 0;
      if (filter === 1) add = left;
      else if (filter === 2) add = up;
      else if (filter === 3) add = (left + up) >> 1;
      else if (filter === 4) {
        const p = left + up - upLeft;
        const [pa, pb, pc] = [Math.abs(p - left), Math.abs(p - up), Math.abs(p - upLeft)];
        add = pa <= pb && pa <= pc ? left : pb <= pc ? up : upLeft;
      }
      line[x] = (line[x]! + add) & 0xff;
    }
    for (let x = 0; x < stride; x += channels) colours.add(line.subarray(x, x + channels).toString('hex'));
    previous = line;
  }
  return { width, height, colours: colours.size };
}

const AXE_SOURCE = readFileSync(createRequire(import.meta.url).resolve('axe-core/axe.min.js'), 'utf8');

export interface AxeViolation {
  id: string;
  impact: string | null;
  help: string;
  nodes: number;
}

/**
 * axe-core run inside the page (evaluated through the debugging protocol, which the page's content
 * security policy does not govern); the serious and critical violations.
 */
export async function seriousA11yViolations(page: Page): Promise<AxeViolation[]> {
  await page.evaluate(AXE_SOURCE);
  const violations = (await page.evaluate(
    `axe.run(document, { resultTypes: ['violations'] }).then((r) => r.violations.map((v) => ({ id: v.id, impact: v.impact, help: v.help, nodes: v.nodes.length })))`,
  )) as AxeViolation[];
  return violations.filter((v) => v.impact === 'serious' || v.impact === 'critical');
}
