// `tsx bench/support/heap-diff.ts before.heapsnapshot after.heapsnapshot [rows]`: what grew between two
// V8 heap snapshots, grouped by constructor (objects, closures, native objects) or by node type
// (strings, arrays, code, ...), sorted by growth in self size, then by growth in count.
//
// Snapshots of a few hundred MiB exceed what one JSON.parse of the whole file can take, so the
// numeric node array is scanned straight from the bytes and only the header and string table are
// parsed as JSON. Edges are not needed for self sizes and are skipped.
//
// Not a bench module: bench/run.ts imports every bench file, so nothing here runs on import.
import { readFileSync } from 'node:fs';
import { resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

interface Group {
  count: number;
  size: number;
}

function parseInts(buf: Buffer, from: number, into: Float64Array): number {
  let i = from;
  let n = 0;
  let value = 0;
  let inNumber = false;
  for (; i < buf.length; i++) {
    const c = buf[i]!;
    if (c >= 48 && c <= 57) {
      value = value * 10 + (c - 48);
      inNumber = true;
    } else {
      if (inNumber) {
        into[n++] = value;
        value = 0;
        inNumber = false;
      }
      if (c === 93) break; // ']'
    }
  }
  if (n !== into.length) throw new Error(`expected ${into.length} numbers, read ${n}`);
  return i;
}

export function summarize(file: string): Map<string, Group> {
  const buf = readFileSync(file);
  const nodesAt = buf.indexOf('"nodes":[');
  const head = buf.subarray(0, nodesAt).toString('utf8').trim().replace(/,$/, '');
  const { snapshot } = JSON.parse(`${head}}`) as {
    snapshot: {
      meta: { node_fields: string[]; node_types: [string[], ...unknown[]] };
      node_count: number;
    };
  };
  const fields = snapshot.meta.node_fields;
  const stride = fields.length;
  const nodes = new Float64Array(snapshot.node_count * stride);
  parseInts(buf, nodesAt + '"nodes":['.length, nodes);
  const stringsAt = buf.lastIndexOf('"strings":[');
  const end = buf.lastIndexOf(']');
  const strings = JSON.parse(
    buf.subarray(stringsAt + '"strings":'.length, end + 1).toString('utf8'),
  ) as string[];
  const types = snapshot.meta.node_types[0];
  const typeAt = fields.indexOf('type');
  const nameAt = fields.indexOf('name');
  const sizeAt = fields.indexOf('self_size');
  const groups = new Map<string, Group>();
  for (let i = 0; i < nodes.length; i += stride) {
    const type = types[nodes[i + typeAt]!]!;
    const name = strings[nodes[i + nameAt]!] ?? '?';
    const key =
      type === 'object' || type === 'native' || type === 'closure'
        ? `${type} ${name.length > 60 ? `${name.slice(0, 57)}...` : name}`
        : `(${type})`;
    const group = groups.get(key) ?? { count: 0, size: 0 };
    group.count++;
    group.size += nodes[i + sizeAt]!;
    groups.set(key, group);
  }
  return groups;
}

function main(): void {
  const [beforeFile, afterFile, rowsArg] = process.argv.slice(2);
  if (!beforeFile || !afterFile)
    throw new Error('usage: heap-diff.ts before.heapsnapshot after.heapsnapshot [rows]');
  const rows = Number(rowsArg ?? 30);
  const before = summarize(beforeFile);
  const after = summarize(afterFile);
  const total = (m: Map<string, Group>) => [...m.values()].reduce((s, g) => s + g.size, 0);
  const diff = [...new Set([...before.keys(), ...after.keys()])].map((key) => {
    const b = before.get(key) ?? { count: 0, size: 0 };
    const a = after.get(key) ?? { count: 0, size: 0 };
    return { key, count: a.count - b.count, size: a.size - b.size, afterCount: a.count, afterSize: a.size };
  });
  const mib = (n: number) => (n / 2 ** 20).toFixed(2);
  process.stdout.write(
    `self size: ${mib(total(before))} MiB -> ${mib(total(after))} MiB (${mib(total(after) - total(before))} MiB)\n`,
  );
  const print = (title: string, list: typeof diff) => {
    process.stdout.write(
      `\n${title}\n${'Δ size MiB'.padStart(11)}  ${'Δ count'.padStart(9)}  ${'count'.padStart(9)}  group\n`,
    );
    for (const d of list.slice(0, rows))
      process.stdout.write(
        `${mib(d.size).padStart(11)}  ${String(d.count).padStart(9)}  ${String(d.afterCount).padStart(9)}  ${d.key}\n`,
      );
  };
  print(
    'grew most in self size',
    [...diff].sort((x, y) => y.size - x.size),
  );
  print(
    'grew most in count',
    [...diff].sort((x, y) => y.count - x.count),
  );
}

const entry = process.argv[1] ? resolve(process.argv[1]) : '';
if (entry === fileURLToPath(import.meta.url)) main();
